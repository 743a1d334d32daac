import FerryCore
import Foundation

/// A user of the app, with the identities that log in as them.
public struct User: Sendable, Equatable {
    public var id: String
    public var identities: [Identity]
    /// Identity metadata (`%%user.data`), e.g. claims of a custom JWT.
    public var data: [String: FerryValue]
    public var disabled: Bool
    /// Access tokens issued before this time (seconds since the epoch) are refused: an admin
    /// revoked the user's sessions then (0: never).
    public var sessionsValidAfter: Int64

    public var context: UserContext { UserContext(id: id, data: data) }

    public init(id: String, identities: [Identity], data: [String: FerryValue], disabled: Bool, sessionsValidAfter: Int64 = 0) {
        self.id = id
        self.identities = identities
        self.data = data
        self.disabled = disabled
        self.sessionsValidAfter = sessionsValidAfter
    }
}

public struct Identity: Sendable, Equatable, Hashable {
    /// The provider type: `anon-user`, `local-userpass`, `custom-token`, `api-key`.
    public var provider: String
    /// The user's id at that provider (the email, the JWT subject, a generated id).
    public var providerUserId: String

    public init(provider: String, providerUserId: String) {
        self.provider = provider
        self.providerUserId = providerUserId
    }
}

/// Where users, password hashes, API keys and refresh-token hashes are kept. The in-memory
/// directory serves tests; the server's SQLite and PostgreSQL stores implement the same
/// protocol.
public protocol UserDirectory: Sendable {
    func user(id: String) async throws -> User?
    func user(identity: Identity) async throws -> User?
    func createUser(identity: Identity, data: [String: FerryValue]) async throws -> User
    func updateData(userId: String, data: [String: FerryValue]) async throws
    func passwordHash(email: String) async throws -> String?
    /// Stores a new account's password hash unless the email already has one, as one step:
    /// true if stored, false (nothing changed) if the email was taken, also by a concurrent
    /// registration. An existing hash is never replaced.
    func addPasswordHash(email: String, hash: String) async throws -> Bool
    /// Replaces an account's password hash by `new` if it is still `old`, as one step (a
    /// login upgrading a hash made at a lower cost): true if replaced, false if the account's
    /// hash is no longer `old` (another login upgraded it first) or the account is gone.
    func replacePasswordHash(email: String, old: String, new: String) async throws -> Bool
    func addAPIKey(userId: String, keyHash: String, name: String) async throws
    func userId(apiKeyHash: String) async throws -> String?
    func storeRefreshToken(hash: String, userId: String, expires: Date) async throws
    /// The user of a live refresh token, or nil (unknown, revoked or expired at `now`).
    func refreshTokenUser(hash: String, now: Date) async throws -> String?
    func revokeRefreshToken(hash: String) async throws
    /// Every user, for the admin API.
    func allUsers() async throws -> [User]
    /// Disables or enables a user: a disabled user cannot log in, refresh or sync.
    func setDisabled(userId: String, _ disabled: Bool) async throws
    /// Admin: forgets a user with its identities, password hash, API keys and refresh tokens
    /// (its sync data stays: objects belong to the app, not to a user record).
    func deleteUser(id: String) async throws
    /// Admin: ends every session of a user: its refresh tokens are revoked, and access tokens
    /// issued before `validAfter` (seconds since the epoch) are refused from now on.
    func revokeSessions(userId: String, validAfter: Int64) async throws
}

/// A `UserDirectory` in memory (tests, development).
public actor InMemoryUserDirectory: UserDirectory {
    private var users: [String: User] = [:]
    private var byIdentity: [Identity: String] = [:]
    private var passwords: [String: String] = [:]
    private var apiKeys: [String: String] = [:]
    private var refreshTokens: [String: (user: String, expires: Date)] = [:]

    public init() {}

    public func user(id: String) -> User? { users[id] }
    public func user(identity: Identity) -> User? { byIdentity[identity].flatMap { users[$0] } }

    public func createUser(identity: Identity, data: [String: FerryValue]) -> User {
        if let existing = user(identity: identity) { return existing }
        let id = ObjectId.generate(secondsSinceEpoch: WallClock.system.objectIdSeconds()).description
        let u = User(id: id, identities: [identity], data: data, disabled: false)
        users[id] = u
        byIdentity[identity] = id
        return u
    }

    public func updateData(userId: String, data: [String: FerryValue]) { users[userId]?.data = data }
    public func passwordHash(email: String) -> String? { passwords[email] }
    public func addPasswordHash(email: String, hash: String) -> Bool {
        guard passwords[email] == nil else { return false }
        passwords[email] = hash
        return true
    }
    public func replacePasswordHash(email: String, old: String, new: String) -> Bool {
        guard passwords[email] == old else { return false }
        passwords[email] = new
        return true
    }
    public func addAPIKey(userId: String, keyHash: String, name: String) { apiKeys[keyHash] = userId }
    public func userId(apiKeyHash: String) -> String? { apiKeys[apiKeyHash] }
    public func storeRefreshToken(hash: String, userId: String, expires: Date) { refreshTokens[hash] = (userId, expires) }

    public func refreshTokenUser(hash: String, now: Date) -> String? {
        guard let t = refreshTokens[hash], t.expires > now else { return nil }
        return t.user
    }

    public func revokeRefreshToken(hash: String) { refreshTokens[hash] = nil }
    public func allUsers() -> [User] { users.values.sorted { $0.id < $1.id } }
    public func setDisabled(userId: String, _ disabled: Bool) { users[userId]?.disabled = disabled }
    public func deleteUser(id: String) {
        guard let u = users.removeValue(forKey: id) else { return }
        for i in u.identities {
            byIdentity[i] = nil
            if i.provider == "local-userpass" { passwords[i.providerUserId] = nil }
        }
        apiKeys = apiKeys.filter { $0.value != id }
        refreshTokens = refreshTokens.filter { $0.value.user != id }
    }
    public func revokeSessions(userId: String, validAfter: Int64) {
        refreshTokens = refreshTokens.filter { $0.value.user != userId }
        users[userId]?.sessionsValidAfter = validAfter
    }
}
