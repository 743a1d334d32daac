import FerryAuth
import Foundation
import Testing
@testable import FerryServer

/// Issue 22 point 6: the admin surface. A short `FERRY_ADMIN_TOKEN` stops the start; wrong
/// tokens are throttled per client address; `adminPort` moves the admin API, the console and
/// `/metrics` to a listener of their own, off the public port.
@Suite("Server: the admin surface")
struct AdminSurfaceTests {
    static let api = "/api/admin/v1/sync"

    static func status(_ response: [UInt8]) -> Int? { WireFormat.response(response)?.status }

    static func adminGet(port: Int, _ path: String = api, token: String? = LiveServer.adminToken, from client: String? = nil) async throws -> [UInt8] {
        var headers: [String: String] = [:]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        if let client { headers["X-Forwarded-For"] = client }
        return try await LiveServer.request(port: port, "GET", path, headers: headers)
    }

    static func adminStatus(port: Int, _ path: String = api, token: String? = LiveServer.adminToken, from client: String? = nil) async throws -> Int? {
        status(try await adminGet(port: port, path, token: token, from: client))
    }

    @Test(arguments: ["", "x", String(repeating: "k", count: 31)])
    func aShortAdminTokenStopsTheStart(_ token: String) async throws {
        var config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                         dataDirectory: NSTemporaryDirectory() + "ferry-admin-\(UInt64.random(in: 0...UInt64.max))",
                                         secrets: ["jwtSigningKey": AuthAPITests.jwtKey, "FERRY_ADMIN_TOKEN": token])
        config.descriptorReserve = 0
        do {
            _ = try await FerryServer.make(config)
            Issue.record("started with an admin token of \(token.utf8.count) bytes")
        } catch let e as ServerStartError {
            #expect(e.description.contains("FERRY_ADMIN_TOKEN must have at least 32 bytes"), "\(e)")
            #expect(e.description.contains("it has \(token.utf8.count)"), "\(e)")
        }
    }

    @Test func anAdminTokenOf32BytesStarts() async throws {
        let token = String(repeating: "k", count: 32)
        try await LiveServer.withServer(configure: { $0.secrets["FERRY_ADMIN_TOKEN"] = token }) { port in
            do { let status = try await Self.adminStatus(port: port, token: token); #expect(status == 200) }
        }
    }

    /// Ten wrong tokens from an address, then that address is refused (the right token too)
    /// with 429 and Retry-After; another address is not. The addresses are a trusted proxy's
    /// (loopback here), which is also how an admin listener behind a proxy is throttled.
    @Test func wrongAdminTokensAreThrottledPerAddress() async throws {
        try await LiveServer.withServer(configure: {
            $0.adminFailureLimits.firstDelay = 300
            $0.adminFailureLimits.maxDelay = 300
            $0.trustedProxies = try! TrustedProxies(proxies: ["127.0.0.1"])
        }) { port in
            let attacker = "203.0.113.7", admin = "198.51.100.9"
            for i in 0..<10 {
                do { let status = try await Self.adminStatus(port: port, token: "wrong-\(i)", from: attacker); #expect(status == 401) }
            }
            let refused = try await Self.adminGet(port: port, from: attacker)
            #expect(Self.status(refused) == 429)
            let text = String(decoding: refused, as: UTF8.self)
            // The wait left, in whole seconds: 300 less what a loaded machine took since the
            // tenth failure (299 was seen in a whole-suite run).
            let retryAfter = text.lowercased().firstMatch(of: /retry-after: (\d+)/).flatMap { Int($0.1) }
            #expect(retryAfter.map { (270...300).contains($0) } == true, "\(text)")
            #expect(text.contains("TooManyRequests"))
            // /metrics behind the token is the same door.
            do { let status = try await Self.adminStatus(port: port, "/metrics", from: attacker); #expect(status == 429) }
            // Another address, and a request with no token at all, are not affected.
            do { let status = try await Self.adminStatus(port: port, from: admin); #expect(status == 200) }
            do { let status = try await Self.adminStatus(port: port, token: nil, from: attacker); #expect(status == 401) }
        }
    }

    @Test func aSuccessClearsTheAddresssFailures() async throws {
        try await LiveServer.withServer(configure: { $0.adminFailureLimits.firstDelay = 300 }) { port in
            for _ in 0..<9 { do { let status = try await Self.adminStatus(port: port, token: "wrong"); #expect(status == 401) } }
            do { let status = try await Self.adminStatus(port: port); #expect(status == 200) }
            for _ in 0..<9 { do { let status = try await Self.adminStatus(port: port, token: "wrong"); #expect(status == 401) } }
            do { let status = try await Self.adminStatus(port: port); #expect(status == 200) }
        }
    }

    @Test func aSeparateAdminListenerServesTheAdminSurfaceAndThePublicPortDoesNot() async throws {
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        try await LiveServer.withServer(configure: {
            $0.adminPort = 0
            $0.onAdminListening = { port in
                sink.yield(port)
                sink.finish()
            }
        }) { port in
            var iterator = ports.makeAsyncIterator()
            let adminPort = try #require(await iterator.next())
            #expect(adminPort != port)
            for path in [Self.api, "/api/admin/v1/stats", "/api/admin/v1/users", "/metrics", "/admin", "/admin/console.js"] {
                do { let status = try await Self.adminStatus(port: adminPort, path); #expect(status == 200, "\(path) on the admin port") }
                do { let status = try await Self.adminStatus(port: port, path); #expect(status == 404, "\(path) on the public port") }
            }
            do { let status = try await Self.adminStatus(port: adminPort, token: "wrong"); #expect(status == 401) }
            // The public port still serves the app; the admin port does not.
            _ = try await LiveServer.anonymousUser(port: port)
            let login = try await LiveServer.request(port: adminPort, "POST", "/api/client/v2.0/app/item-app-seeds/auth/providers/anon-user/login")
            #expect(Self.status(login) == 404)
            let health = try await LiveServer.request(port: port, "GET", "/health")
            #expect(Self.status(health) == 200)
        }
    }
}
