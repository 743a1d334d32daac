import FerryTestSupport
import FerryAppConfig
import Foundation
import Testing
@testable import FerryAuth

/// Issue 22 point 7: the throttle let parallel guesses no further than sequential ones by
/// refusing every attempt beyond the free budget while others were in flight, so ten devices
/// of one account logging in at once with the right password got five 429s. Now such attempts
/// wait their turn; guesses are still held to the budget. Registering a taken email is
/// charged to the sign-up budget, so emails cannot be enumerated for free.
@Suite("Authentication: bursts of logins, enumeration")
struct LoginBurstTests {
    let clock = TestClock()
    static let remote = ClientAddress(key: "203.0.113.7", isLoopback: false)

    func service(_ limits: AuthLimits = AuthLimits(), directory: InMemoryUserDirectory = InMemoryUserDirectory(),
                 hasher: PasswordHasher = PasswordHasher(parameters: .fastForTests)) async throws -> AuthService {
        let c = clock
        let tokens = try await TokenService(secret: Array("server-secret-for-tests-0123456789abcdef".utf8), appId: "item-app", now: { c.now })
        return AuthService(providers: providers(["anon-user", "local-userpass"]), directory: directory, tokens: tokens,
                           hasher: hasher, limits: limits)
    }

    /// `count` logins at once; each one's error, nil for a success.
    func concurrentLogins(_ auth: AuthService, _ count: Int, email: @escaping @Sendable (Int) -> String,
                          password: @escaping @Sendable (Int) -> String, from address: ClientAddress? = nil) async -> [AuthError?] {
        await withTaskGroup(of: AuthError?.self) { group in
            for i in 0..<count {
                group.addTask {
                    do {
                        _ = try await auth.login(email: email(i), password: password(i), from: address)
                        return nil
                    } catch { return error as? AuthError ?? .invalidToken("unexpected \(error)") }
                }
            }
            return await group.reduce(into: [AuthError?]()) { $0.append($1) }
        }
    }

    @Test func tenConcurrentCorrectLoginsOfOneAccountAllGetIn() async throws {
        let auth = try await service(AuthLimits(accountFreeFailures: 5))
        try await auth.register(email: "kiosk@example.com", password: "s3cret!")
        let results = await concurrentLogins(auth, 10, email: { _ in "kiosk@example.com" }, password: { _ in "s3cret!" }, from: Self.remote)
        #expect(results.compactMap { $0 }.isEmpty, "\(results)")
    }

    /// Many accounts behind one address (an office's NAT): more at once than the address's
    /// free failures.
    @Test func concurrentCorrectLoginsFromOneAddressAllGetIn() async throws {
        let auth = try await service(AuthLimits(addressFreeFailures: 4))
        for i in 0..<12 { try await auth.register(email: "user\(i)@example.com", password: "s3cret!") }
        let results = await concurrentLogins(auth, 12, email: { "user\($0)@example.com" }, password: { _ in "s3cret!" }, from: Self.remote)
        #expect(results.compactMap { $0 }.isEmpty, "\(results)")
    }

    /// A wrong-password burst against an account with no successful login among it: exactly
    /// the free budget is checked, the rest refused, whatever the order.
    @Test func aBurstOfGuessesGetsExactlyTheFreeBudget() async throws {
        var limits = AuthLimits(accountFreeFailures: 5)
        limits.firstDelay = 300
        let auth = try await service(limits)
        try await auth.register(email: "alice@example.com", password: "s3cret!")
        let results = await concurrentLogins(auth, 40, email: { _ in "alice@example.com" }, password: { "guess-\($0)" })
        #expect(results.filter { $0 == .invalidCredentials }.count == 5, "\(results)")
        #expect(results.filter { $0 == .tooManyFailedLogins(retryAfter: 300) }.count == 35, "\(results)")
    }

    /// Attempts past the free budget wait for the one in flight and are then decided by its
    /// outcome; past the waiting room's size an attempt is refused at once rather than queued.
    @Test func waitingAttemptsAreDecidedByTheOneInFlightAndBounded() async throws {
        var limits = AuthLimits(accountFreeFailures: 1, firstDelay: 300, maxDelay: 300)
        limits.maxWaitingLoginsPerKey = 2
        let (counts, sink) = AsyncStream.makeStream(of: Int.self)
        let throttle = LoginThrottle(limits: limits, onWaiting: { sink.yield($0) })
        let t = clock.now
        let first = try await throttle.begin(account: "a", address: nil, now: t)
        let waiters = (0..<2).map { _ in Task { try await throttle.begin(account: "a", address: nil, now: t) } }
        try await within(60, "two attempts waiting") { for await n in counts where n == 2 { return } }
        await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 1)) { try await throttle.begin(account: "a", address: nil, now: t) }
        // The attempt in flight fails: the account is blocked, and the waiting ones are refused.
        throttle.finish(first, .failed, now: t)
        for w in waiters {
            await #expect(throws: AuthError.tooManyFailedLogins(retryAfter: 300)) { _ = try await w.value }
        }

        // Had it succeeded, they would have gone in, one after the other past the budget.
        let other = try await throttle.begin(account: "b", address: nil, now: t)
        throttle.finish(try await throttle.begin(account: "c", address: nil, now: t), .failed, now: t)
        clock.advance(300)
        let t2 = clock.now
        let c1 = try await throttle.begin(account: "c", address: nil, now: t2)
        let queued = Task { try await throttle.begin(account: "c", address: nil, now: t2) }
        try await within(60, "one attempt waiting") { for await n in counts where n == 1 { return } }
        throttle.finish(c1, .succeeded, now: t2)
        throttle.finish(try await queued.value, .succeeded, now: t2)
        throttle.finish(other, .succeeded, now: t2)
    }

    @Test func registeringATakenEmailIsChargedToTheSignupBudget() async throws {
        let auth = try await service(AuthLimits(signupsPerMinute: 1, signupBurst: 3))
        try await auth.register(email: "alice@example.com", password: "s3cret!", from: Self.remote)
        for _ in 0..<2 {
            await #expect(throws: AuthError.emailAlreadyRegistered) { try await auth.register(email: "alice@example.com", password: "other!!", from: Self.remote) }
        }
        // Probing further, taken or not, is refused like any sign-up past the budget.
        await #expect(throws: AuthError.tooManySignups(retryAfter: 60)) { try await auth.register(email: "alice@example.com", password: "other!!", from: Self.remote) }
        await #expect(throws: AuthError.tooManySignups(retryAfter: 60)) { try await auth.register(email: "bob@example.com", password: "other!!", from: Self.remote) }
    }

    /// Hashes record their parameters: one made at the old cost (N = 2^15) still verifies, and
    /// the first successful login replaces it with one at OWASP's (N = 2^17).
    @Test func aHashAtTheOldCostIsUpgradedAtTheNextLogin() async throws {
        #expect(PasswordHasher.Parameters.standard == PasswordHasher.Parameters(rounds: 1 << 17, blockSize: 8, parallelism: 1))
        let directory = InMemoryUserDirectory()
        let old = try PasswordHasher(parameters: PasswordHasher.Parameters(rounds: 1 << 15, blockSize: 8, parallelism: 1)).hash("s3cret!")
        #expect(old.hasPrefix("scrypt$32768$8$1$"))
        #expect(await directory.addPasswordHash(email: "old@example.com", hash: old))
        _ = await directory.createUser(identity: Identity(provider: "local-userpass", providerUserId: "old@example.com"), data: [:])
        let auth = try await service(directory: directory, hasher: PasswordHasher())
        // A wrong password changes nothing.
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "old@example.com", password: "wrong!!") }
        #expect(await directory.passwordHash(email: "old@example.com") == old)
        _ = try await auth.login(email: "old@example.com", password: "s3cret!")
        let upgraded = try #require(await directory.passwordHash(email: "old@example.com"))
        #expect(upgraded.hasPrefix("scrypt$131072$8$1$"), "\(upgraded)")
        #expect(try PasswordHasher().verify("s3cret!", against: upgraded))
        // Already at the cost: the next login leaves it alone.
        _ = try await auth.login(email: "old@example.com", password: "s3cret!")
        #expect(await directory.passwordHash(email: "old@example.com") == upgraded)
    }

    @Test func theUpgradeReplacesOnlyTheHashItVerified() async throws {
        let directory = InMemoryUserDirectory()
        #expect(await directory.addPasswordHash(email: "a@example.com", hash: "scrypt$1$old"))
        #expect(await !directory.replacePasswordHash(email: "a@example.com", old: "scrypt$2$other", new: "scrypt$3$new"))
        #expect(await directory.replacePasswordHash(email: "a@example.com", old: "scrypt$1$old", new: "scrypt$3$new"))
        #expect(await directory.passwordHash(email: "a@example.com") == "scrypt$3$new")
        #expect(await !directory.replacePasswordHash(email: "nobody@example.com", old: "scrypt$1$old", new: "scrypt$3$new"))
    }
}
