import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
@testable import FerryServer

/// The admin API, and users that survive a restart (the SQLite user store).
@Suite("Server: admin API and persistent users")
struct AdminAPITests {
    static let adminToken = "an-admin-token-for-tests-of-32-bytes-or-more"

    func configuration(data: String? = nil, admin: Bool = true) -> ServerConfiguration {
        var secrets = ["jwtSigningKey": AuthAPITests.jwtKey]
        if admin { secrets["FERRY_ADMIN_TOKEN"] = Self.adminToken }
        var c = ServerConfiguration(appDirectory: AuthAPITests.example,
                                    dataDirectory: data ?? NSTemporaryDirectory() + "ferry-admin-\(UInt64.random(in: 0...UInt64.max))",
                                    secrets: secrets)
        // Test-only scrypt cost (internal, so production cannot set it): dozens of servers hash
        // passwords at once here, and at OWASP's cost each hash takes seconds in a debug build.
        // The cost itself is tested in FerryAuthTests (LoginBurstTests).
        c.passwordHashing = .fastForTests
        return c
    }

    func json(_ r: TestResponse) throws -> Any { try JSONSerialization.jsonObject(with: Data(buffer: r.body)) }
    let base = "/api/client/v2.0/app/item-app-seeds/auth/providers"
    let bearer: HTTPFields = [.authorization: "Bearer \(AdminAPITests.adminToken)"]

    @Test func disabledWithoutTokenAndRefusesWrongToken() async throws {
        try await FerryServer.make(configuration(admin: false)).test(.router) { client in
            try await client.execute(uri: "/api/admin/v1/users", method: .get, headers: bearer) { #expect($0.status == .forbidden) }
        }
        try await FerryServer.make(configuration()).test(.router) { client in
            try await client.execute(uri: "/api/admin/v1/users", method: .get) { #expect($0.status == .unauthorized) }
            try await client.execute(uri: "/api/admin/v1/users", method: .get, headers: [.authorization: "Bearer nope"]) { #expect($0.status == .unauthorized) }
        }
    }

    @Test func listDisableEnableUsers() async throws {
        try await FerryServer.make(configuration()).test(.router) { client in
            let login = try await client.execute(uri: "\(base)/anon-user/login", method: .post) { try json($0) as? [String: Any] }
            let id = try #require(login?["user_id"] as? String)
            let access = try #require(login?["access_token"] as? String)
            let users = try await client.execute(uri: "/api/admin/v1/users", method: .get, headers: bearer) { try json($0) as? [[String: Any]] }
            #expect(users?.contains { $0["id"] as? String == id && $0["disabled"] as? Bool == false } == true)
            try await client.execute(uri: "/api/admin/v1/users/\(id)/disable", method: .post, headers: bearer) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/client/v2.0/auth/profile", method: .get, headers: [.authorization: "Bearer \(access)"]) {
                #expect($0.status != .ok)
            }
            try await client.execute(uri: "/api/admin/v1/users/\(id)/enable", method: .post, headers: bearer) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/api/client/v2.0/auth/profile", method: .get, headers: [.authorization: "Bearer \(access)"]) {
                #expect($0.status == .ok)
            }
            let logs = try await client.execute(uri: "/api/admin/v1/logs", method: .get, headers: bearer) { try json($0) as? [String: Any] }
            let kinds = (logs?["entries"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
            #expect(kinds == ["user_disabled", "user_enabled"])
            let status = try await client.execute(uri: "/api/admin/v1/sync/terminate", method: .post, headers: bearer) { try json($0) as? [String: Any] }
            #expect(status?["sync_enabled"] as? Bool == false)
            let again = try await client.execute(uri: "/api/admin/v1/sync/enable", method: .post, headers: bearer) { try json($0) as? [String: Any] }
            #expect(again?["sync_enabled"] as? Bool == true)
        }
    }

    @Test func usersAndRefreshTokensSurviveARestart() async throws {
        let data = NSTemporaryDirectory() + "ferry-restart-\(UInt64.random(in: 0...UInt64.max))"
        let (userId, refresh) = try await FerryServer.make(configuration(data: data)).test(.router) { client in
            try await client.execute(uri: "\(base)/local-userpass/register", method: .post,
                                     body: ByteBuffer(string: #"{"email":"keep@example.com","password":"password123"}"#)) { #expect($0.status == .created) }
            let login = try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                                 body: ByteBuffer(string: #"{"username":"keep@example.com","password":"password123"}"#)) { try json($0) as? [String: Any] }
            return (try #require(login?["user_id"] as? String), try #require(login?["refresh_token"] as? String))
        }
        try await FerryServer.make(configuration(data: data)).test(.router) { client in
            let login = try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                                 body: ByteBuffer(string: #"{"username":"keep@example.com","password":"password123"}"#)) { try json($0) as? [String: Any] }
            #expect(login?["user_id"] as? String == userId)
            try await client.execute(uri: "/api/client/v2.0/auth/session", method: .post, headers: [.authorization: "Bearer \(refresh)"]) {
                #expect($0.status == .ok)
            }
        }
    }

    /// The terminate is kept in the store: a restarted server still refuses to sync until an
    /// admin enables it (a restart must not silently undo an admin's decision).
    @Test func aTerminateSurvivesARestart() async throws {
        let data = NSTemporaryDirectory() + "ferry-terminate-\(UInt64.random(in: 0...UInt64.max))"
        let auth: HTTPFields = [.authorization: "Bearer \(Self.adminToken)"]
        try await FerryServer.make(configuration(data: data)).test(.router) { client in
            try await client.execute(uri: "/api/admin/v1/sync/terminate", method: .post, headers: auth) { #expect($0.status == .ok) }
        }
        try await FerryServer.make(configuration(data: data)).test(.router) { client in
            let status = try await client.execute(uri: "/api/admin/v1/sync", method: .get, headers: auth) { try json($0) as? [String: Any] }
            #expect(status?["sync_enabled"] as? Bool == false)
            try await client.execute(uri: "/api/admin/v1/sync/enable", method: .post, headers: auth) { #expect($0.status == .ok) }
        }
        try await FerryServer.make(configuration(data: data)).test(.router) { client in
            let status = try await client.execute(uri: "/api/admin/v1/sync", method: .get, headers: auth) { try json($0) as? [String: Any] }
            #expect(status?["sync_enabled"] as? Bool == true)
        }
    }
}
