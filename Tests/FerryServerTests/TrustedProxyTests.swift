import FerryAuth
import Foundation
import NIOCore
import Testing
@testable import FerryServer

/// Issue 22 point 7: behind a reverse proxy on the same host every client came from loopback,
/// which the per-address limits exempt. A trusted proxy's header now names the client, and
/// only a trusted proxy's. Also, over HTTP: a burst of correct logins all get in, and
/// registering a taken email is charged.
@Suite("Server: trusted proxies and sign-up limits over HTTP")
struct TrustedProxyTests {
    static let base = "/api/client/v2.0/app/item-app-seeds/auth/providers"

    static func status(_ response: [UInt8]) -> Int? { WireFormat.response(response)?.status }

    static func post(port: Int, _ path: String, _ body: String = "", from client: String? = nil) async throws -> [UInt8] {
        var headers = ["Content-Type": "application/json"]
        if let client { headers["X-Forwarded-For"] = client }
        return try await LiveServer.request(port: port, "POST", base + path, headers: headers, body: body)
    }

    static func postStatus(port: Int, _ path: String, _ body: String = "", from client: String? = nil) async throws -> Int? {
        status(try await post(port: port, path, body, from: client))
    }

    /// Two sign-ups per address, none refilled during the test.
    static func tightSignups(_ c: inout ServerConfiguration) {
        c.authLimits.signupBurst = 2
        c.authLimits.signupsPerMinute = 0.001
        c.passwordHashing = .fastForTests
    }

    @Test func aTrustedProxysHeaderNamesTheClient() async throws {
        try await LiveServer.withServer(configure: {
            Self.tightSignups(&$0)
            $0.trustedProxies = try! TrustedProxies(proxies: ["127.0.0.1"])
        }) { port in
            // The proxy appends the address it was reached from; what a client put before it
            // is not believed.
            for _ in 0..<2 { do { let status = try await Self.postStatus(port: port, "/anon-user/login", from: "203.0.113.7"); #expect(status == 200) } }
            let refused = try await Self.post(port: port, "/anon-user/login", from: "6.6.6.6, 203.0.113.7")
            #expect(Self.status(refused) == 429, "\(String(decoding: refused, as: UTF8.self))")
            // Another client behind the same proxy has its own budget.
            do { let status = try await Self.postStatus(port: port, "/anon-user/login", from: "198.51.100.9"); #expect(status == 200) }
            // The proxy's own requests (no header) are loopback's: exempt.
            for _ in 0..<3 { do { let status = try await Self.postStatus(port: port, "/anon-user/login"); #expect(status == 200) } }
        }
    }

    @Test func theHeaderFromAPeerThatIsNotATrustedProxyIsIgnored() async throws {
        try await LiveServer.withServer(configure: {
            Self.tightSignups(&$0)
            $0.trustedProxies = try! TrustedProxies(proxies: ["10.0.0.0/8"])
        }) { port in
            // From loopback, not a trusted proxy: attributed to loopback (exempt), whatever the
            // header claims.
            for _ in 0..<4 { do { let status = try await Self.postStatus(port: port, "/anon-user/login", from: "203.0.113.7"); #expect(status == 200) } }
        }
    }

    /// Registering a taken email answered 409 before any budget was charged, so a client could
    /// test emails without limit.
    @Test func registeringATakenEmailIsChargedSoEnumerationHitsTheLimit() async throws {
        try await LiveServer.withServer(configure: {
            Self.tightSignups(&$0)
            $0.trustedProxies = try! TrustedProxies(proxies: ["127.0.0.1"])
        }) { port in
            let alice = #"{"email":"alice@example.com","password":"s3cret!"}"#
            // Registered by someone else (loopback: exempt).
            do { let status = try await Self.postStatus(port: port, "/local-userpass/register", alice); #expect(status == 201) }
            let prober = "203.0.113.7"
            for _ in 0..<2 { do { let status = try await Self.postStatus(port: port, "/local-userpass/register", alice, from: prober); #expect(status == 409) } }
            for email in ["alice@example.com", "bob@example.com"] {
                let body = #"{"email":"\#(email)","password":"s3cret!"}"#
                do { let status = try await Self.postStatus(port: port, "/local-userpass/register", body, from: prober); #expect(status == 429) }
            }
        }
    }

    @Test func tenConcurrentCorrectLoginsOfOneAccountAllGetIn() async throws {
        try await LiveServer.withServer(configure: { $0.passwordHashing = .fastForTests }) { port in
            let credentials = #"{"username":"kiosk@example.com","password":"s3cret!"}"#
            do { let status = try await Self.postStatus(port: port, "/local-userpass/register", #"{"email":"kiosk@example.com","password":"s3cret!"}"#); #expect(status == 201) }
            let statuses = try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<10 {
                    group.addTask { Self.status(try await Self.post(port: port, "/local-userpass/login", credentials, from: "203.0.113.7")) }
                }
                return try await group.reduce(into: [Int?]()) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 10), "\(statuses)")
        }
    }

    @Test func theClientIsTheRightmostAddressThatIsNotATrustedProxy() throws {
        let proxies = try TrustedProxies(proxies: ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"])
        let lo = try SocketAddress(ipAddress: "127.0.0.1", port: 40000)
        let outside = try SocketAddress(ipAddress: "203.0.113.7", port: 40000)
        #expect(proxies.clientAddress(peer: lo, headerValues: ["198.51.100.9"])?.key == "198.51.100.9")
        #expect(proxies.clientAddress(peer: lo, headerValues: ["1.2.3.4, 198.51.100.9, 10.1.2.3"])?.key == "198.51.100.9")
        #expect(proxies.clientAddress(peer: lo, headerValues: ["1.2.3.4", "198.51.100.9:5678"])?.key == "198.51.100.9")
        #expect(proxies.clientAddress(peer: lo, headerValues: ["[2001:db8:1:2::7]:443"])?.key == "2001:db8:1:2::/64")
        #expect(proxies.clientAddress(peer: try SocketAddress(ipAddress: "::1", port: 1), headerValues: ["2001:db8::1"])?.key == "2001:db8:0:0::/64")
        // Only proxies in the chain: the first of them.
        #expect(proxies.clientAddress(peer: lo, headerValues: ["10.0.0.9, 10.0.0.8"])?.key == "10.0.0.9")
        // A header that is not an address does not make the client loopback.
        #expect(proxies.clientAddress(peer: lo, headerValues: ["unknown"]) == ClientAddress(key: "unparseable", isLoopback: false))
        // No header, or a peer that is not trusted: the peer is the client.
        #expect(proxies.clientAddress(peer: lo, headerValues: []) == nil)
        #expect(proxies.clientAddress(peer: outside, headerValues: ["198.51.100.9"]) == nil)
        #expect(proxies.clientAddress(peer: try SocketAddress(ipAddress: "11.0.0.1", port: 1), headerValues: ["198.51.100.9"]) == nil)
    }

    @Test func proxiesAreAddressesOrNetworks() throws {
        #expect(IPNetwork("10.0.0.0/8")?.contains([10, 200, 3, 4]) == true)
        #expect(IPNetwork("10.0.0.0/8")?.contains([11, 0, 0, 1]) == false)
        #expect(IPNetwork("192.168.1.128/25")?.contains([192, 168, 1, 200]) == true)
        #expect(IPNetwork("192.168.1.128/25")?.contains([192, 168, 1, 100]) == false)
        #expect(IPNetwork("127.0.0.1")?.prefixLength == 32)
        #expect(IPNetwork("::1")?.prefixLength == 128)
        for bad in ["", "localhost", "10.0.0.0/33", "10.0.0.0/x", "::1/129", "1.2.3"] { #expect(IPNetwork(bad) == nil, "\(bad)") }
        #expect(throws: ServerStartError.self) { try TrustedProxies(proxies: ["proxy.internal"]) }
        #expect(throws: ServerStartError.self) { try TrustedProxies(header: "Bad Header", proxies: ["127.0.0.1"]) }
    }
}
