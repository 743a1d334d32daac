import FerryAppConfig
import FerryCore
import Foundation

/// A logged-in session as the client receives it.
public struct AuthSession: Sendable, Equatable {
    public var userId: String
    public var accessToken: String
    public var refreshToken: String
}

/// Logging in with each provider, registering email/password users, refreshing and revoking
/// sessions, and API keys. Providers not enabled in the app's `auth/providers.json` refuse.
///
/// Not an actor: it holds no mutable state of its own (the limits keep theirs under their own
/// locks), so `authenticate(accessToken:)`, which every sync connection calls, never waits for
/// anything else. Password hashing runs on its own `PasswordHashingPool`.
public final class AuthService: Sendable {
    private let directory: UserDirectory
    private let tokens: TokenService
    private let hasher: PasswordHasher
    private let hashing: PasswordHashingPool
    private let customJWT: CustomJWTVerifier?
    private let enabled: Set<String>
    private let loginThrottle: LoginThrottle
    private let signups: SignupLimit
    public static let minimumPasswordLength = CredentialRules.minimumPasswordLength
    public static let maximumPasswordBytes = CredentialRules.maximumPasswordBytes
    public static let maximumEmailBytes = CredentialRules.maximumEmailBytes

    /// `hashing` defaults to a pool sized by `limits`; tests pass their own to watch it.
    public init(providers: [AuthProviderConfiguration], directory: UserDirectory, tokens: TokenService,
                hasher: PasswordHasher = PasswordHasher(), customJWT: CustomJWTVerifier? = nil,
                limits: AuthLimits = AuthLimits(), hashing: PasswordHashingPool? = nil) {
        self.directory = directory
        self.tokens = tokens
        self.hasher = hasher
        self.hashing = hashing ?? PasswordHashingPool(threads: limits.hashingThreads, maxQueued: limits.maxQueuedHashes)
        self.customJWT = customJWT
        enabled = Set(providers.filter { !$0.disabled }.map(\.type))
        loginThrottle = LoginThrottle(limits: limits)
        signups = SignupLimit(limits: limits)
    }

    private func require(_ provider: String) throws {
        guard enabled.contains(provider) else { throw AuthError.providerDisabled(provider) }
    }

    private func session(for user: User) async throws -> AuthSession {
        let access = try await tokens.issueAccessToken(userId: user.id)
        let (refresh, hash) = tokens.newRefreshToken()
        try await directory.storeRefreshToken(hash: hash, userId: user.id, expires: tokens.refreshExpiry(from: tokens.currentDate))
        return AuthSession(userId: user.id, accessToken: access, refreshToken: refresh)
    }

    /// A new anonymous user; `address` (the client's) pays one sign-up of its budget.
    public func loginAnonymous(from address: ClientAddress? = nil) async throws -> AuthSession {
        try require("anon-user")
        try signups.take(address, now: tokens.currentDate)
        let identity = Identity(provider: "anon-user", providerUserId: UUID().uuidString)
        return try await session(for: try await directory.createUser(identity: identity, data: [:]))
    }

    /// Registers an email/password user. Of concurrent registrations of one email exactly one
    /// succeeds; the others get `emailAlreadyRegistered`.
    public func register(email: String, password: String, from address: ClientAddress? = nil) async throws {
        try require("local-userpass")
        let normalized = try CredentialRules.normalizedEmail(email, registering: true)
        try CredentialRules.checkLength(of: password, registering: true)
        // Charged before the email is looked up: otherwise "taken" (409) answers would be free,
        // and a client could enumerate the registered emails without limit.
        try signups.take(address, now: tokens.currentDate)
        guard try await directory.passwordHash(email: normalized) == nil else { throw AuthError.emailAlreadyRegistered }
        let hash = try await hashing.run { [hasher] in try hasher.hash(password) }
        guard try await directory.addPasswordHash(email: normalized, hash: hash) else { throw AuthError.emailAlreadyRegistered }
        _ = try await directory.createUser(identity: Identity(provider: "local-userpass", providerUserId: normalized), data: ["email": .string(normalized)])
    }

    /// Logs in with email and password. Throttled per account and per `address`
    /// (`LoginThrottle`); an unknown email costs one verification like a known one and gets the
    /// same answer.
    public func login(email: String, password: String, from address: ClientAddress? = nil) async throws -> AuthSession {
        try require("local-userpass")
        let normalized = try CredentialRules.normalizedEmail(email, registering: false)
        try CredentialRules.checkLength(of: password, registering: false)
        let attempt = try await loginThrottle.begin(account: normalized, address: address, now: tokens.currentDate)
        var outcome = LoginThrottle.Outcome.undecided
        defer { loginThrottle.finish(attempt, outcome, now: tokens.currentDate) }
        let stored = try await directory.passwordHash(email: normalized)
        let matches = try await hashing.run { [hasher] in try hasher.verify(password, against: stored ?? hasher.unmatchableHash) }
        guard let stored, matches, let user = try await directory.user(identity: Identity(provider: "local-userpass", providerUserId: normalized)),
              !user.disabled else {
            outcome = .failed
            throw AuthError.invalidCredentials
        }
        outcome = .succeeded
        if hasher.needsRehash(stored) { await rehash(email: normalized, password: password, replacing: stored) }
        return try await session(for: user)
    }

    /// Replaces a hash made at other parameters (a lower cost from before issue 22) by one at
    /// the hasher's, now that the password is known. Best effort: the login has succeeded
    /// whatever happens here, and a hash not upgraded now is upgraded at a later login.
    private func rehash(email: String, password: String, replacing old: String) async {
        do {
            let new = try await hashing.run { [hasher] in try hasher.hash(password) }
            _ = try await directory.replacePasswordHash(email: email, old: old, new: new)
        } catch {
            // The pool was busy (503 territory) or the store failed: the old hash still
            // verifies, so nothing is lost but the upgrade, which the next login retries.
        }
    }

    /// Logs in with a token from the host's identity provider; the same subject is the same user.
    public func login(customToken: String) async throws -> AuthSession {
        try require("custom-token")
        guard let customJWT else { throw AuthError.providerDisabled("custom-token") }
        let (subject, metadata) = try await customJWT.verify(customToken)
        let user = try await directory.createUser(identity: Identity(provider: "custom-token", providerUserId: subject), data: metadata)
        if user.data != metadata && !metadata.isEmpty { try await directory.updateData(userId: user.id, data: metadata) }
        guard !user.disabled else { throw AuthError.invalidCredentials }
        return try await session(for: user)
    }

    /// Creates an API key for a user; the key is shown once and stored only hashed.
    public func createAPIKey(userId: String, name: String) async throws -> String {
        try require("api-key")
        guard try await directory.user(id: userId) != nil else { throw AuthError.userNotFound }
        let (key, hash) = tokens.newRefreshToken()
        try await directory.addAPIKey(userId: userId, keyHash: hash, name: name)
        return key
    }

    public func login(apiKey: String) async throws -> AuthSession {
        try require("api-key")
        guard let id = try await directory.userId(apiKeyHash: TokenService.hash(apiKey)),
              let user = try await directory.user(id: id), !user.disabled else { throw AuthError.invalidCredentials }
        return try await session(for: user)
    }

    /// A new access token for a live refresh token.
    public func refresh(refreshToken: String) async throws -> String {
        guard let id = try await directory.refreshTokenUser(hash: TokenService.hash(refreshToken), now: tokens.currentDate),
              let user = try await directory.user(id: id), !user.disabled else { throw AuthError.invalidRefreshToken }
        return try await tokens.issueAccessToken(userId: user.id)
    }

    /// Logs out: the refresh token stops working (access tokens expire on their own).
    public func logout(refreshToken: String) async throws {
        try await directory.revokeRefreshToken(hash: TokenService.hash(refreshToken))
    }

    /// The user behind an access token, for the sync endpoint and the other HTTP routes.
    public func authenticate(accessToken: String) async throws -> User {
        let (id, issuedAt) = try await tokens.verifiedAccessToken(accessToken)
        guard let user = try await directory.user(id: id), !user.disabled else { throw AuthError.userNotFound }
        // Issued in or before the second an admin revoked the user's sessions.
        guard Int64(issuedAt.timeIntervalSince1970.rounded(.down)) > user.sessionsValidAfter else {
            throw AuthError.invalidToken("the user's sessions were revoked by an admin")
        }
        return user
    }
}
