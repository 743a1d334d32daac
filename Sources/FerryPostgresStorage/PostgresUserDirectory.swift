import FerryAuth
import FerryCore
import Foundation
import Logging
import PostgresNIO

/// The server's users in PostgreSQL, shared by every node: identities, password hashes, API key
/// hashes and refresh-token hashes, in the tables (and, for `data`, the blob encoding) of the
/// SQLite directory. Races between nodes are settled by the database: a second registration of
/// an email, or a second creation of one identity, finds the first one's row.
public final class PostgresUserDirectory: UserDirectory, Sendable {
    private let client: PostgresClient
    private let logger: Logger

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Encoding (the SQLite directory's `data` blob)

    static func encode(_ data: [String: FerryValue]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(UInt64(data.count))
        for (k, v) in data.sorted(by: { $0.key < $1.key }) { w.string(k); ValueCodec.encode(v, into: &w) }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [String: FerryValue] {
        var r = ByteReader(bytes)
        var out: [String: FerryValue] = [:]
        for _ in 0..<(try r.count(minSize: 2)) { out[try r.string()] = try ValueCodec.decode(from: &r) }
        return out
    }

    // MARK: Queries

    private func rows(_ what: String, _ query: PostgresQuery) async throws -> [PostgresRow] {
        try await PostgresFailure.run(what) {
            let lease = try await BoundedLease.lease(from: client, within: PostgresSyncStorage.leaseDeadline)
            defer { lease.release() }
            return try await lease.connection.guardedQuery(query, logger: logger).collect()
        }
    }

    private func text(_ what: String, _ query: PostgresQuery) async throws -> String? {
        guard let row = try await rows(what, query).first else { return nil }
        return try PostgresObjectReads.decodeRow(row, String.self, "the user directory")
    }

    private func load(_ id: String) async throws -> User? {
        guard let row = try await rows("reading user \(id)", "SELECT data, disabled, sessions_valid_after FROM users WHERE id = \(id)").first else { return nil }
        let (data, disabled, validAfter) = try PostgresObjectReads.decodeRow(row, (ByteBuffer, Bool, Int64).self, "users")
        var identities: [Identity] = []
        for r in try await rows("reading user \(id)'s identities",
                                "SELECT provider, provider_user_id FROM identities WHERE user_id = \(id) ORDER BY provider COLLATE \"C\", provider_user_id COLLATE \"C\"") {
            let (provider, providerUserId) = try PostgresObjectReads.decodeRow(r, (String, String).self, "identities")
            identities.append(Identity(provider: provider, providerUserId: providerUserId))
        }
        return User(id: id, identities: identities, data: try Self.decode(data.bytes), disabled: disabled, sessionsValidAfter: validAfter)
    }

    private func userId(identity: Identity) async throws -> String? {
        try await text("looking up a \(identity.provider) identity", """
            SELECT user_id FROM identities WHERE provider = \(identity.provider) AND provider_user_id = \(identity.providerUserId)
            """)
    }

    // MARK: UserDirectory

    public func user(id: String) async throws -> User? { try await load(id) }

    public func user(identity: Identity) async throws -> User? {
        guard let id = try await userId(identity: identity) else { return nil }
        return try await load(id)
    }

    /// The identity's user, created if it has none. Two nodes creating one identity at once:
    /// the identity insert of one finds the other's row, rolls its new user back, and returns
    /// the user that won.
    public func createUser(identity: Identity, data: [String: FerryValue]) async throws -> User {
        if let existing = try await user(identity: identity) { return existing }
        let id = ObjectId.generate(secondsSinceEpoch: WallClock.system.objectIdSeconds()).description
        let created: Bool
        do {
            try await PostgresFailure.run("creating a user for a \(identity.provider) identity") {
            let lease = try await BoundedLease.lease(from: client, within: PostgresSyncStorage.leaseDeadline)
            defer { lease.release() }
            let connection = lease.connection
            return try await PostgresTransaction.run(connection, logger: logger) {
                    try await connection.guardedQuery("INSERT INTO users (id, data) VALUES (\(id), \(Self.encode(data).buffer))", logger: logger)
                    let inserted = try await connection.guardedQuery("""
                        INSERT INTO identities (provider, provider_user_id, user_id)
                        VALUES (\(identity.provider), \(identity.providerUserId), \(id))
                        ON CONFLICT (provider, provider_user_id) DO NOTHING RETURNING user_id
                        """, logger: logger).collect()
                    if inserted.isEmpty { throw LostRace() }
                    return true
                }
            }
            created = true
        } catch is LostRace {
            created = false
        }
        if created { return User(id: id, identities: [identity], data: data, disabled: false) }
        guard let winner = try await user(identity: identity) else {
            throw FerryError(.io, "PostgreSQL: a \(identity.provider) identity was created concurrently and then vanished")
        }
        return winner
    }

    public func updateData(userId: String, data: [String: FerryValue]) async throws {
        _ = try await rows("updating user \(userId)'s data", "UPDATE users SET data = \(Self.encode(data).buffer) WHERE id = \(userId)")
    }

    public func passwordHash(email: String) async throws -> String? {
        try await text("reading a password hash", "SELECT hash FROM passwords WHERE email = \(email)")
    }

    /// One statement, so concurrent registrations of one email on any nodes store exactly one hash.
    public func addPasswordHash(email: String, hash: String) async throws -> Bool {
        try await !rows("storing a password hash", """
            INSERT INTO passwords (email, hash) VALUES (\(email), \(hash)) ON CONFLICT (email) DO NOTHING RETURNING 1
            """).isEmpty
    }

    public func replacePasswordHash(email: String, old: String, new: String) async throws -> Bool {
        try await !rows("upgrading a password hash", """
            UPDATE passwords SET hash = \(new) WHERE email = \(email) AND hash = \(old) RETURNING 1
            """).isEmpty
    }

    public func addAPIKey(userId: String, keyHash: String, name: String) async throws {
        _ = try await rows("storing an API key of user \(userId)", """
            INSERT INTO api_keys (hash, user_id, name) VALUES (\(keyHash), \(userId), \(name))
            ON CONFLICT (hash) DO UPDATE SET user_id = excluded.user_id, name = excluded.name
            """)
    }

    public func userId(apiKeyHash: String) async throws -> String? {
        try await text("looking up an API key", "SELECT user_id FROM api_keys WHERE hash = \(apiKeyHash)")
    }

    public func storeRefreshToken(hash: String, userId: String, expires: Date) async throws {
        _ = try await rows("storing a refresh token of user \(userId)", """
            INSERT INTO refresh_tokens (hash, user_id, expires) VALUES (\(hash), \(userId), \(expires))
            ON CONFLICT (hash) DO UPDATE SET user_id = excluded.user_id, expires = excluded.expires
            """)
    }

    public func refreshTokenUser(hash: String, now: Date) async throws -> String? {
        try await text("looking up a refresh token", "SELECT user_id FROM refresh_tokens WHERE hash = \(hash) AND expires > \(now)")
    }

    public func revokeRefreshToken(hash: String) async throws {
        _ = try await rows("revoking a refresh token", "DELETE FROM refresh_tokens WHERE hash = \(hash)")
    }

    /// Two queries, joined here (not one per user).
    public func allUsers() async throws -> [User] {
        var identities: [String: [Identity]] = [:]
        for r in try await rows("reading every identity", "SELECT user_id, provider, provider_user_id FROM identities ORDER BY provider COLLATE \"C\", provider_user_id COLLATE \"C\"") {
            let (userId, provider, providerUserId) = try PostgresObjectReads.decodeRow(r, (String, String, String).self, "identities")
            identities[userId, default: []].append(Identity(provider: provider, providerUserId: providerUserId))
        }
        return try await rows("reading every user", "SELECT id, data, disabled, sessions_valid_after FROM users ORDER BY id COLLATE \"C\"").map { r in
            let (id, data, disabled, validAfter) = try PostgresObjectReads.decodeRow(r, (String, ByteBuffer, Bool, Int64).self, "users")
            return User(id: id, identities: identities[id] ?? [], data: try Self.decode(data.bytes), disabled: disabled, sessionsValidAfter: validAfter)
        }
    }

    public func setDisabled(userId: String, _ disabled: Bool) async throws {
        _ = try await rows("disabling user \(userId)", "UPDATE users SET disabled = \(disabled) WHERE id = \(userId)")
    }

    public func deleteUser(id: String) async throws {
        // One statement: every part goes, or none.
        _ = try await rows("deleting user \(id)", """
            WITH p AS (DELETE FROM passwords WHERE email IN (SELECT provider_user_id FROM identities WHERE user_id = \(id)
                    AND provider = 'local-userpass')),
                i AS (DELETE FROM identities WHERE user_id = \(id)),
                k AS (DELETE FROM api_keys WHERE user_id = \(id)),
                r AS (DELETE FROM refresh_tokens WHERE user_id = \(id))
            DELETE FROM users WHERE id = \(id)
            """)
    }

    public func revokeSessions(userId: String, validAfter: Int64) async throws {
        // One statement: both, or neither.
        _ = try await rows("revoking user \(userId)'s sessions", """
            WITH r AS (DELETE FROM refresh_tokens WHERE user_id = \(userId))
            UPDATE users SET sessions_valid_after = \(validAfter) WHERE id = \(userId)
            """)
    }
}

/// Thrown inside `createUser`'s transaction when another node created the identity first.
private struct LostRace: Error {}
