import FerryAuth
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
@testable import FerryServer

/// The authentication limits as HTTP clients see them (issue 11 points 8 and 12): 429 with
/// `Retry-After` once logins or sign-ups are throttled, the same answer for an unknown email
/// as for a wrong password, and 400 for credentials out of bounds.
@Suite("Server: auth limits")
struct AuthLimitsAPITests {
    let base = "/api/client/v2.0/app/item-app-seeds/auth/providers"

    func configuration(_ limits: AuthLimits = AuthLimits()) -> ServerConfiguration {
        var c = ServerConfiguration(appDirectory: AuthAPITests.example,
                                    dataDirectory: NSTemporaryDirectory() + "ferry-server-\(UInt64.random(in: 0...UInt64.max))",
                                    secrets: ["jwtSigningKey": AuthAPITests.jwtKey])
        c.authLimits = limits
        c.passwordHashing = .fastForTests   // as in AuthAPITests.configuration
        return c
    }

    func body(_ json: String) -> ByteBuffer { ByteBuffer(string: json) }

    func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any])
    }

    /// The tests lower the cost; a server hashes at OWASP's minimum (issue 22).
    @Test func aServerHashesPasswordsAtOWASPsCost() {
        let c = ServerConfiguration(appDirectory: AuthAPITests.example, dataDirectory: NSTemporaryDirectory())
        #expect(c.passwordHashing == .standard)
        #expect(PasswordHasher.Parameters.standard == PasswordHasher.Parameters(rounds: 1 << 17, blockSize: 8, parallelism: 1))
    }

    /// The suites that start `ferry-server` as a process lower it with
    /// `--weak-password-hashing-for-tests`, which only a loopback-only server accepts.
    @Test func weakHashingIsOnlyForALoopbackServer() throws {
        for host in ["127.0.0.1", "127.8.0.1", "::1", "localhost"] {
            var c = ServerConfiguration(appDirectory: AuthAPITests.example, dataDirectory: NSTemporaryDirectory(), host: host)
            try c.weakenPasswordHashingForLocalTests()
            #expect(c.passwordHashing == .fastForTests, "\(host)")
        }
        for host in ["0.0.0.0", "::", "10.0.0.1", "127.0.0.1.example.com", "127.evil.example.com", "127.1.2.300", "example.com", ""] {
            var c = ServerConfiguration(appDirectory: AuthAPITests.example, dataDirectory: NSTemporaryDirectory(), host: host)
            #expect(throws: ServerStartError.self, "\(host)") { try c.weakenPasswordHashingForLocalTests() }
            #expect(c.passwordHashing == .standard, "\(host)")
        }
    }

    @Test func repeatedWrongPasswordsGet429WithRetryAfter() async throws {
        // A first delay of 5 minutes: it cannot run out between the third guess and the
        // login below, however loaded the machine (at 1 s it did, once, in the full suite).
        var limits = AuthLimits(accountFreeFailures: 3)
        limits.firstDelay = 300
        limits.maxDelay = 300
        let app = try await FerryServer.make(configuration(limits))
        try await app.test(.router) { client in
            try await client.execute(uri: "\(base)/local-userpass/register", method: .post,
                                     body: body(#"{"email":"alice@example.com","password":"s3cret!"}"#)) { #expect($0.status == .created) }
            for _ in 0..<3 {
                try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                         body: body(#"{"username":"alice@example.com","password":"guess!"}"#)) { #expect($0.status == .unauthorized) }
            }
            try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                     body: body(#"{"username":"alice@example.com","password":"s3cret!"}"#)) { r in
                #expect(r.status == .tooManyRequests)
                #expect(Int(r.headers[.retryAfter] ?? "").map { $0 > 0 && $0 <= 300 } == true)
                let o = try object(r)
                #expect(o["error_code"] as? String == "TooManyRequests")
                #expect((o["error"] as? String)?.contains("too many failed logins") == true)
            }
        }
    }

    @Test func anUnknownEmailIsAnsweredLikeAWrongPassword() async throws {
        let app = try await FerryServer.make(configuration())
        try await app.test(.router) { client in
            try await client.execute(uri: "\(base)/local-userpass/register", method: .post,
                                     body: body(#"{"email":"alice@example.com","password":"s3cret!"}"#)) { #expect($0.status == .created) }
            let known = try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                                 body: body(#"{"username":"alice@example.com","password":"guess!"}"#)) { $0 }
            let unknown = try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                                   body: body(#"{"username":"nobody@example.com","password":"guess!"}"#)) { $0 }
            #expect(known.status == .unauthorized)
            #expect(unknown.status == known.status)
            #expect(String(buffer: unknown.body) == String(buffer: known.body))
        }
    }

    @Test func credentialsOutOfBoundsGet400() async throws {
        let app = try await FerryServer.make(configuration())
        try await app.test(.router) { client in
            let long = String(repeating: "p", count: 257)
            try await client.execute(uri: "\(base)/local-userpass/register", method: .post,
                                     body: body(#"{"email":"alice@example.com","password":"\#(long)"}"#)) { r in
                #expect(r.status == .badRequest)
                let o = try object(r)
                #expect(o["error_code"] as? String == "BadRequest")
                #expect(o["error"] as? String == "the password must be at most 256 bytes (UTF-8)")
            }
            try await client.execute(uri: "\(base)/local-userpass/register", method: .post,
                                     body: body(#"{"email":"alice\u0000@example.com","password":"s3cret!"}"#)) { r in
                #expect(r.status == .badRequest)
                let o = try object(r)
                #expect(o["error"] as? String == "the email address is not valid: it contains a control character")
            }
            try await client.execute(uri: "\(base)/local-userpass/login", method: .post,
                                     body: body(#"{"username":"alice\u0000@example.com","password":"s3cret!"}"#)) { r in
                #expect(r.status == .badRequest)
            }
        }
    }

    /// Over real connections, so the limit keys on the address the server sees (loopback here,
    /// limited only because this configuration asks for it).
    @Test func anonymousSignupsFromOneAddressGet429() async throws {
        let app = try await FerryServer.make(configuration(AuthLimits(signupsPerMinute: 1, signupBurst: 2, limitLoopback: true)))
        try await app.test(.live) { client in
            for _ in 0..<2 {
                try await client.execute(uri: "\(base)/anon-user/login", method: .post) { #expect($0.status == .ok) }
            }
            try await client.execute(uri: "\(base)/anon-user/login", method: .post) { r in
                #expect(r.status == .tooManyRequests)
                #expect(Int(r.headers[.retryAfter] ?? "") ?? 0 > 0)
                let o = try object(r)
                #expect(o["error_code"] as? String == "TooManyRequests")
            }
        }
    }

    @Test func loopbackSignupsAreNotLimitedByDefault() async throws {
        let app = try await FerryServer.make(configuration(AuthLimits(signupsPerMinute: 1, signupBurst: 2)))
        try await app.test(.live) { client in
            for _ in 0..<5 {
                try await client.execute(uri: "\(base)/anon-user/login", method: .post) { #expect($0.status == .ok) }
            }
        }
    }

    @Test func clientAddressesKeyIPv4AndIPv6Networks() throws {
        let v4 = ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "203.0.113.7", port: 4000))
        #expect(v4 == ClientAddress(key: "203.0.113.7", isLoopback: false))
        #expect(ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "127.0.0.1", port: 1)).isLoopback)
        #expect(ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "::1", port: 1)) == ClientAddress(key: "::1", isLoopback: true))
        let a = ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 1))
        let b = ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "2001:db8:1:2:bbbb::9", port: 1))
        #expect(a == ClientAddress(key: "2001:db8:1:2::/64", isLoopback: false))
        #expect(a == b)
        #expect(ServerRequestContext.clientAddress(try SocketAddress(ipAddress: "::ffff:198.51.100.9", port: 1))
                == ClientAddress(key: "198.51.100.9", isLoopback: false))
    }
}
