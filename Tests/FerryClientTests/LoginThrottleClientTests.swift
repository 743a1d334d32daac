import FerryAuth
import FerryClient
import FerryCore
import Foundation
import Testing

/// Issue 22 point 7: a login the server throttled (429, too many failed logins) reached the
/// host as FERRY_ERR_NETWORK, so a host retried at once, as after a dropped connection. It is
/// an auth error now, and its message says when to try again (the server's Retry-After).
@Suite("Client: a throttled login")
struct LoginThrottleClientTests {
    static func login(_ app: App, _ credentials: Credentials) async -> Result<SyncUser, FerryError> {
        await withCheckedContinuation { c in app.login(credentials) { c.resume(returning: $0) } }
    }

    static func register(_ app: App, _ email: String, _ password: String) async -> Result<Void, FerryError> {
        await withCheckedContinuation { c in app.register(email: email, password: password) { c.resume(returning: $0) } }
    }

    @Test func aThrottledLoginIsAnAuthErrorThatSaysWhenToRetry() async throws {
        try await SyncTestServer.withSingleServer(configure: {
            // Blocked for 5 minutes after one failure: it cannot run out during the test.
            $0.authLimits = AuthLimits(accountFreeFailures: 1, firstDelay: 300, maxDelay: 300)
        }) { url in
            let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: url,
                                                baseDirectory: SyncTestServer.temporaryDirectory("throttled-login"), logLevel: .warn))
            defer { app.close() }
            if case .failure(let e) = await Self.register(app, "alice@example.com", "s3cret!") { Issue.record("register: \(e)") }
            guard case .failure(let wrong) = await Self.login(app, .emailPassword(email: "alice@example.com", password: "guess!!")) else {
                Issue.record("a wrong password logged in")
                return
            }
            #expect(wrong.code == .auth)
            guard case .failure(let throttled) = await Self.login(app, .emailPassword(email: "alice@example.com", password: "s3cret!")) else {
                Issue.record("the throttled login went through")
                return
            }
            #expect(throttled.code == .auth, "\(throttled)")
            #expect(throttled.message.contains("too many failed logins"), "\(throttled)")
            // The seconds left of the 300 s block, from Retry-After.
            let seconds = throttled.message.split(separator: " ").suffix(2).first.flatMap { Int($0) }
            #expect(throttled.message.hasSuffix(" s") && seconds.map { (1...300).contains($0) } == true, "\(throttled)")
        }
    }
}
