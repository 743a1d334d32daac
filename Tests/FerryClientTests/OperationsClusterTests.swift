import FerryTestSupport
import FerryClient
import FerryCore
import FerryServer
import Foundation
import Testing

/// What operators see of real devices (issue 14): the SDK string libferry sends on its sync
/// connection in the device list, and, on two nodes sharing PostgreSQL, the device, its sync log
/// and its rejected writes read through the other node, and the pool metrics.
@Suite("Sync: operations views of real devices")
struct OperationsClusterTests {
    static func json(_ url: String, _ path: String) async throws -> [String: Any] {
        let response = try await AdminAPI.call(url, "GET", path)
        guard response.status == 200, let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw FerryError(.sync, "GET \(path): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
        }
        return json
    }

    /// Calls until `done` is true, for at most `seconds` (another node publishes its
    /// connections and writes its sync log a moment later).
    static func eventually(seconds: Double = 30, _ what: String, _ done: () async throws -> Bool) async throws {
        if try await !poll(seconds: seconds, every: .milliseconds(50), done) { Issue.record("timed out waiting for \(what)") }
    }

    /// GET /metrics with the admin token.
    static func scrape(_ url: String) async throws -> HTTPResponse {
        let loop = try EventLoop.acquireShared()
        defer { EventLoop.releaseShared() }
        let done = Arrival<Result<HTTPResponse, FerryError>>()
        let request = HTTPRequest(method: "GET", url: url + "/metrics", headers: [("Authorization", "Bearer \(AdminAPI.token)")])
        loop.post { HTTPClient.send(request, on: loop, tls: TLSOptions(), timeoutMs: 45_000) { done.deliver($0) } }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "GET /metrics did not answer") }
        return try r.get()
    }

    @Test func theDeviceListShowsTheSDKTheClientSends() async throws {
        try await SyncTestServer.withSingleServer(secrets: AdminAPI.secrets) { url in
            let device = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "sdk-\(UInt64.random(in: 0...UInt64.max))")))
            defer { device.close() }
            try await device.subscribe("ownerId == \"\(device.user.id)\"")
            let devices = try await Self.json(url, "devices")["devices"] as? [[String: Any]] ?? []
            let mine = try #require(devices.first { $0["user_id"] as? String == device.user.id })
            let sdk = try #require(mine["sdk"] as? String)
            #expect(sdk.hasPrefix("ferry/0.1.0 "))
            #expect(sdk.hasSuffix("linux-x86_64") || sdk.hasSuffix("linux-arm64"))
            #expect(mine["client_file"] as? Int ?? 0 > 0)
        }
    }

    @Test(.enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
    func anotherNodeShowsTheDeviceItsSyncLogAndRejectedWrites() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets, configure: { $0.connectionPublishInterval = .milliseconds(100) }) { nodes in
            let device = try await TestDevice(baseURL: nodes[0], credentials: .jwt(testJWT(subject: "ops-\(UInt64.random(in: 0...UInt64.max))")))
            defer { device.close() }
            try await device.subscribe("complexity <= 4")
            // Another owner's item: refused by the role's write filter.
            let id = ObjectId.generate()
            try device.createItem(id, owner: "someone-else", name: "not mine", complexity: 2)
            let errors = await device.errors.wait(count: 1, seconds: 60)
            #expect(errors.first?.code == 231)

            let nodeA = try #require(try await Self.json(nodes[0], "stats")["node"] as? String)
            try await Self.eventually("node b listing node a's device") {
                let devices = try await Self.json(nodes[1], "devices")["devices"] as? [[String: Any]] ?? []
                return devices.contains { $0["user_id"] as? String == device.user.id && $0["node"] as? String == nodeA
                    && ($0["sdk"] as? String)?.hasPrefix("ferry/") == true }
            }
            try await Self.eventually("node b reading the device's sync log") {
                let log = try await Self.json(nodes[1], "users/\(device.user.id)/sync-log")["entries"] as? [[String: Any]] ?? []
                let kinds = Set(log.compactMap { $0["kind"] as? String })
                return kinds.isSuperset(of: ["connection_opened", "session_bound", "subscription_changed", "upload", "compensating_write"])
                    && log.allSatisfy { $0["node"] as? String == nodeA }
            }
            let rejected = try await Self.json(nodes[1], "rejected-writes?user=\(device.user.id)")["entries"] as? [[String: Any]] ?? []
            #expect(rejected.first?["reason"] as? String == "write to \"\(id)\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
            #expect(rejected.first?["rule"] as? String == "write_filter")

            let metrics = try await Self.scrape(nodes[0])
            let text = String(decoding: metrics.body, as: UTF8.self)
            #expect(metrics.status == 200)
            #expect(text.contains("ferry_db_pool_connections{state=\"in_use\"}"))
            #expect(text.contains("ferry_db_pool_max_connections 4"))
            // Node b heard node a's commit through NOTIFY, a moment after it was sent.
            let b = String(decoding: try await Self.scrape(nodes[1]).body, as: UTF8.self)
            let lag = b.split(separator: "\n").first { $0.hasPrefix("ferry_change_feed_lag_seconds ") }.flatMap { Double($0.split(separator: " ")[1]) }
            #expect(lag.map { $0 >= 0 && $0 < 30 } == true, "\(b)")
        }
    }

    @Test(.enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
    func revokingSessionsThroughOneNodeEndsTheConnectionOnTheOther() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets) { nodes in
            let device = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: "revoke-\(UInt64.random(in: 0...UInt64.max))")))
            defer { device.close() }
            try await device.subscribe("ownerId == \"\(device.user.id)\"")
            try await AdminAPI.post(nodes[0], "users/\(device.user.id)/revoke-sessions")
            // Node 2 hears the revision move and ends the connection opened before (401, log out).
            let errors = await device.errors.wait(count: 1, seconds: 30)
            #expect(errors.first?.code == 401)
        }
    }

    @Test(.enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
    func deletingAUserThroughOneNodeEndsItsConnectionOnTheOther() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets) { nodes in
            let device = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: "delete-\(UInt64.random(in: 0...UInt64.max))")))
            defer { device.close() }
            try await device.subscribe("ownerId == \"\(device.user.id)\"")
            let response = try await AdminAPI.call(nodes[0], "DELETE", "users/\(device.user.id)")
            #expect(response.status == 204)
            let errors = await device.errors.wait(count: 1, seconds: 30)
            #expect(errors.first?.code == 401)
            #expect(errors.first?.message.contains("deleted") == true)
        }
    }
}
