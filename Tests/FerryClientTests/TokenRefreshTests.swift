import FerryClient
import FerryCore
import Foundation
import Testing

/// SPEC F-USERCACHE: a device whose access token the server refuses refreshes it with its
/// refresh token and goes on syncing, without the host noticing. Here the server restarts with
/// another access-token secret (every access token it issued before is now refused), on the
/// same port and data directory (its users and refresh tokens survive).
@Suite("Token refresh", .serialized)
struct TokenRefreshTests {
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard ok else { throw FerryError(.io, "no free port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    @Test func aRefusedAccessTokenIsRefreshedAndSyncGoesOn() async throws {
        let data = SyncTestServer.temporaryDirectory("refresh-server")
        let port = try Self.freePort()
        let first = ["FERRY_TOKEN_SECRET": String(repeating: "a", count: 40)]
        let second = ["FERRY_TOKEN_SECRET": String(repeating: "b", count: 40)]
        var device: TestDevice?
        let id = ObjectId.generate()
        try await SyncTestServer.withServer(dataDirectory: data, port: port, secrets: first) { url in
            let d = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "refresh-user")))
            device = d
            try await d.subscribe("complexity <= 4")
            try d.createItem(id, owner: d.user.id, name: "before the restart", complexity: 1)
            try await d.sync()
        }
        let d = try #require(device)
        defer { d.close() }
        let oldToken = d.user.accessToken
        // Written while the server is down: uploaded once the device is back, with a new token.
        try d.write { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("after the restart")) }
        try await SyncTestServer.withServer(dataDirectory: data, port: port, secrets: second) { url in
            try await d.sync()
            #expect(d.user.accessToken != oldToken)
            let other = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "refresh-user")))
            defer { other.close() }
            try await other.subscribe("complexity <= 4")
            #expect(try other.item(id)?[2] == .string("after the restart"))
            #expect(d.errors.all.isEmpty)
        }
    }
}
