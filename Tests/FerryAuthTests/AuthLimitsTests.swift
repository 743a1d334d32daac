import FerryAppConfig
import Foundation
import Testing
@testable import FerryAuth

/// Issue 11 points 8 and 12: failed logins slow down per account and per address, sign-ups
/// are budgeted per address, and credentials have bounds. Time is the test clock's.
@Suite("Authentication: limits")
struct AuthLimitsTests {
    let clock = TestClock()
    static let remote = ClientAddress(key: "203.0.113.7", isLoopback: false)
    static let other = ClientAddress(key: "198.51.100.9", isLoopback: false)
    static let loopback = ClientAddress(key: "127.0.0.1", isLoopback: true)

    func service(_ limits: AuthLimits = AuthLimits()) async throws -> AuthService {
        let c = clock
        let tokens = try await TokenService(secret: Array("server-secret-for-tests-0123456789abcdef".utf8), appId: "item-app", now: { c.now })
        return AuthService(providers: providers(["anon-user", "local-userpass"]), directory: InMemoryUserDirectory(), tokens: tokens,
                           hasher: PasswordHasher(parameters: .fastForTests), limits: limits)
    }

    @Test func failedLoginsOfAnAccountGetGrowingDelays() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 5, firstDelay: 1, maxDelay: 8))
        try await auth.register(email: "alice@example.com", password: "s3cret!")
        for _ in 0..<5 {
            await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "alice@example.com", password: "guess!") }
        }
        // Refused without a look at the password, the right one included.
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await auth.login(email: "alice@example.com", password: "s3cret!") }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await auth.login(email: "ALICE@example.com", password: "guess!") }
        clock.advance(1)
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "alice@example.com", password: "guess!") }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 2)) { try await auth.login(email: "alice@example.com", password: "guess!") }
        for (wait, expected) in [(2, 4), (4, 8), (8, 8)] {   // doubling, up to maxDelay
            clock.advance(Double(wait))
            await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "alice@example.com", password: "guess!") }
            await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: expected)) {
                try await auth.login(email: "alice@example.com", password: "guess!")
            }
        }
        clock.advance(8)
        // The right password after the wait logs in and clears the account's failures.
        _ = try await auth.login(email: "alice@example.com", password: "s3cret!")
        for _ in 0..<5 {
            await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "alice@example.com", password: "guess!") }
        }
        // Other accounts are not affected.
        try await auth.register(email: "bob@example.com", password: "s3cret!")
        _ = try await auth.login(email: "bob@example.com", password: "s3cret!")
    }

    @Test func unknownAndKnownEmailsAreThrottledAndAnsweredAlike() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 2))
        try await auth.register(email: "alice@example.com", password: "s3cret!")
        for email in ["alice@example.com", "nobody@example.com"] {
            for _ in 0..<2 {
                await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: email, password: "guess!") }
            }
            await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await auth.login(email: email, password: "guess!") }
        }
    }

    @Test func failuresAreForgottenAfterAQuietWhile() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 2, forgetFailuresAfter: 600))
        for _ in 0..<2 { await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "a@example.com", password: "guess!") } }
        clock.advance(600)
        for _ in 0..<2 { await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "a@example.com", password: "guess!") } }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await auth.login(email: "a@example.com", password: "guess!") }
    }

    /// Firing attempts at once gets no more guesses than firing them one by one.
    @Test func concurrentAttemptsShareTheFreeBudget() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 5))
        try await auth.register(email: "alice@example.com", password: "s3cret!")
        let results = await withTaskGroup(of: AuthError?.self) { group in
            for i in 0..<24 {
                group.addTask {
                    do { _ = try await auth.login(email: "alice@example.com", password: "guess-\(i)"); return nil } catch { return error as? AuthError }
                }
            }
            return await group.reduce(into: [AuthError?]()) { $0.append($1) }
        }
        #expect(results.filter { $0 == .invalidCredentials }.count == 5)
        #expect(results.filter { if case .tooManyFailedLogins? = $0 { return true } else { return false } }.count == 19)
    }

    @Test func failedLoginsFromOneAddressAcrossAccountsAreThrottled() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 5, addressFreeFailures: 3))
        for i in 0..<3 {
            await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "user\(i)@example.com", password: "guess!", from: Self.remote) }
        }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) {
            try await auth.login(email: "fresh@example.com", password: "guess!", from: Self.remote)
        }
        // Another address, and loopback (exempt by default), are not affected.
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "fresh@example.com", password: "guess!", from: Self.other) }
        for i in 0..<4 {
            await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "local\(i)@example.com", password: "guess!", from: Self.loopback) }
        }
        // A success from the address does not clear the address's failures.
        try await auth.register(email: "eve@example.com", password: "s3cret!")
        clock.advance(1)
        _ = try await auth.login(email: "eve@example.com", password: "s3cret!", from: Self.remote)
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "more@example.com", password: "guess!", from: Self.remote) }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 2)) {
            try await auth.login(email: "fresh2@example.com", password: "guess!", from: Self.remote)
        }
    }

    @Test func loopbackIsLimitedWhenConfigured() async throws {
        let auth = try await service(AuthLimits(addressFreeFailures: 1, signupsPerMinute: 1, signupBurst: 1, limitLoopback: true))
        _ = try await auth.loginAnonymous(from: Self.loopback)
        await #expect(throws: AuthError.tooManySignups(retryAfter: 60)) { try await auth.loginAnonymous(from: Self.loopback) }
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "a@example.com", password: "guess!", from: Self.loopback) }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await auth.login(email: "b@example.com", password: "guess!", from: Self.loopback) }
    }

    @Test func signupsFromOneAddressAreBudgeted() async throws {
        let auth = try await service(AuthLimits(signupsPerMinute: 30, signupBurst: 3))
        for _ in 0..<2 { _ = try await auth.loginAnonymous(from: Self.remote) }
        try await auth.register(email: "alice@example.com", password: "s3cret!", from: Self.remote)   // the same budget
        await #expect(throws: AuthError.tooManySignups(retryAfter: 2)) { try await auth.loginAnonymous(from: Self.remote) }
        await #expect(throws: AuthError.tooManySignups(retryAfter: 2)) { try await auth.register(email: "bob@example.com", password: "s3cret!", from: Self.remote) }
        // Another address, loopback and in-process callers (no address) have budgets of their own.
        _ = try await auth.loginAnonymous(from: Self.other)
        for _ in 0..<10 { _ = try await auth.loginAnonymous(from: Self.loopback) }
        for _ in 0..<10 { _ = try await auth.loginAnonymous() }
        clock.advance(1)
        await #expect(throws: AuthError.tooManySignups(retryAfter: 1)) { try await auth.loginAnonymous(from: Self.remote) }
        clock.advance(1)
        _ = try await auth.loginAnonymous(from: Self.remote)
    }

    @Test func theDefaultsLetALocalTestSuiteSignUpHundredsOfUsers() async throws {
        let auth = try await service()
        for _ in 0..<500 { _ = try await auth.loginAnonymous(from: Self.loopback) }
        for _ in 0..<120 { _ = try await auth.loginAnonymous(from: Self.remote) }
        await #expect(throws: AuthError.tooManySignups(retryAfter: 1)) { try await auth.loginAnonymous(from: Self.remote) }
    }

    @Test func passwordsHaveAMaximumLength() async throws {
        let auth = try await service()
        let longest = String(repeating: "p", count: 256), tooLong = String(repeating: "p", count: 257)
        try await auth.register(email: "alice@example.com", password: longest)
        _ = try await auth.login(email: "alice@example.com", password: longest)
        await #expect(throws: AuthError.passwordTooLong(maximumBytes: 256)) { try await auth.register(email: "bob@example.com", password: tooLong) }
        await #expect(throws: AuthError.passwordTooLong(maximumBytes: 256)) { try await auth.login(email: "alice@example.com", password: tooLong) }
        // Bytes, not characters: 86 three-byte characters are 258 bytes.
        await #expect(throws: AuthError.passwordTooLong(maximumBytes: 256)) {
            try await auth.register(email: "carol@example.com", password: String(repeating: "€", count: 86))
        }
    }

    @Test func emailsMayNotHoldControlCharactersOrBeTooLong() async throws {
        let auth = try await service()
        for email in ["alice\u{0}@example.com", "alice@example.com\u{0}", "al\u{7}ice@example.com", "alice@exa\u{7F}mple.com", "alice\n@example.com"] {
            await #expect(throws: AuthError.invalidEmail("it contains a control character")) { try await auth.register(email: email, password: "s3cret!") }
            await #expect(throws: AuthError.invalidEmail("it contains a control character")) { try await auth.login(email: email, password: "s3cret!") }
        }
        let long = String(repeating: "a", count: 310) + "@example.com"
        await #expect(throws: AuthError.invalidEmail("it has more than 320 bytes")) { try await auth.register(email: long, password: "s3cret!") }
        try await auth.register(email: String(repeating: "a", count: 300) + "@example.com", password: "s3cret!")
    }

    @Test func errorsSayWhenToRetry() {
        #expect(AuthError.tooManyFailedLogins(retryAfter: 4).retryAfter == 4)
        #expect(AuthError.tooManySignups(retryAfter: 2).code == "TooManyRequests")
        #expect(AuthError.hashingBusy.retryAfter == 1)
        #expect(AuthError.invalidCredentials.retryAfter == nil)
    }
}
