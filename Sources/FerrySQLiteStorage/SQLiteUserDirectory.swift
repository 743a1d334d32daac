import FerryAuth
import FerryCore
import FerrySQLite
import Foundation

/// The server's users on SQLite (`users.sqlite` in the data directory): identities, password
/// hashes, API key hashes and refresh-token hashes survive restarts, so devices stay logged in.
public final class SQLiteUserDirectory: UserDirectory, @unchecked Sendable {
    private let db: SQLiteConnection
    private let lock = ThreadLock()

    public init(path: String) throws {
        db = try SQLiteConnection(creatingAt: path, description: "the server's user store \(path)")
        try db.exec("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL, disabled INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS identities (provider TEXT NOT NULL, provider_user_id TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (provider, provider_user_id));
            CREATE TABLE IF NOT EXISTS passwords (email TEXT PRIMARY KEY NOT NULL, hash TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS api_keys (hash TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL, name TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS refresh_tokens (hash TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL, expires REAL NOT NULL);
            CREATE INDEX IF NOT EXISTS identities_by_user ON identities (user_id, provider);
            """)
        // Files made before an admin could revoke sessions.
        let column = try db.statement("SELECT 1 FROM pragma_table_info('users') WHERE name = 'sessions_valid_after'")
        let has = try column.step()
        column.reset()
        if !has { try db.exec("ALTER TABLE users ADD COLUMN sessions_valid_after INTEGER NOT NULL DEFAULT 0") }
        // `identities_by_user` (every sync connection reads the user's identities) is created
        // here rather than with its table, so a file made before it gets it on its next open; with
        // `provider` it also gives the identities in the order they are listed.
    }

    /// What SQLite plans for `sql` (`EXPLAIN QUERY PLAN`, one detail line per step): the
    /// tests check that every lookup of this directory uses an index. Without one, finding a
    /// user's identities scanned the whole table, twice per sync connection (2.4 ms at 10,000
    /// users) and once per user for the admin API's list of users.
    package func queryPlan(_ sql: String) throws -> [String] {
        try lock.withLock {
            let s = try db.statement("EXPLAIN QUERY PLAN " + sql)
            defer { s.reset() }
            var details: [String] = []
            while try s.step() { details.append(s.string(3)) }
            return details
        }
    }

    public func close() { lock.withLock { db.close() } }

    private static func encode(_ data: [String: FerryValue]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(UInt64(data.count))
        for (k, v) in data.sorted(by: { $0.key < $1.key }) { w.string(k); ValueCodec.encode(v, into: &w) }
        return w.bytes
    }

    private static func decode(_ bytes: [UInt8]) throws -> [String: FerryValue] {
        var r = ByteReader(bytes)
        var out: [String: FerryValue] = [:]
        for _ in 0..<(try r.count(minSize: 2)) { out[try r.string()] = try ValueCodec.decode(from: &r) }
        return out
    }

    private func load(_ id: String) throws -> User? {
        let s = try db.statement("SELECT data, disabled, sessions_valid_after FROM users WHERE id = ?")
        s.bind(1, id)
        guard try s.step() else { s.reset(); return nil }
        let data = try Self.decode(s.blob(0)), disabled = s.int64(1) != 0, validAfter = s.int64(2)
        s.reset()
        let i = try db.statement("SELECT provider, provider_user_id FROM identities WHERE user_id = ? ORDER BY provider")
        defer { i.reset() }
        i.bind(1, id)
        var identities: [Identity] = []
        while try i.step() { identities.append(Identity(provider: i.string(0), providerUserId: i.string(1))) }
        return User(id: id, identities: identities, data: data, disabled: disabled, sessionsValidAfter: validAfter)
    }

    private func run(_ sql: String, _ bind: (Statement) -> Void) throws {
        let s = try db.statement(sql)
        defer { s.reset() }
        bind(s)
        try s.run()
    }

    private func text(_ sql: String, _ bind: (Statement) -> Void) throws -> String? {
        let s = try db.statement(sql)
        defer { s.reset() }
        bind(s)
        return try s.step() ? s.string(0) : nil
    }

    public func user(id: String) async throws -> User? { try lock.withLock { try load(id) } }

    public func user(identity: Identity) async throws -> User? {
        try lock.withLock {
            guard let id = try text("SELECT user_id FROM identities WHERE provider = ? AND provider_user_id = ?", {
                $0.bind(1, identity.provider); $0.bind(2, identity.providerUserId)
            }) else { return nil }
            return try load(id)
        }
    }

    public func createUser(identity: Identity, data: [String: FerryValue]) async throws -> User {
        try lock.withLock {
            if let id = try text("SELECT user_id FROM identities WHERE provider = ? AND provider_user_id = ?", {
                $0.bind(1, identity.provider); $0.bind(2, identity.providerUserId)
            }), let u = try load(id) { return u }
            let id = ObjectId.generate(secondsSinceEpoch: WallClock.system.objectIdSeconds()).description
            try db.exec("BEGIN IMMEDIATE")
            do {
                try run("INSERT INTO users (id, data) VALUES (?, ?)") { $0.bind(1, id); $0.bind(2, blob: Self.encode(data)) }
                try run("INSERT INTO identities (provider, provider_user_id, user_id) VALUES (?, ?, ?)") {
                    $0.bind(1, identity.provider); $0.bind(2, identity.providerUserId); $0.bind(3, id)
                }
                try db.exec("COMMIT")
            } catch {
                db.rollback()
                throw error
            }
            return User(id: id, identities: [identity], data: data, disabled: false)
        }
    }

    public func updateData(userId: String, data: [String: FerryValue]) async throws {
        try lock.withLock { try run("UPDATE users SET data = ? WHERE id = ?") { $0.bind(1, blob: Self.encode(data)); $0.bind(2, userId) } }
    }

    public func passwordHash(email: String) async throws -> String? {
        try lock.withLock { try text("SELECT hash FROM passwords WHERE email = ?") { $0.bind(1, email) } }
    }

    /// The check and the insert are under one lock, and the insert is a plain one (never
    /// `OR REPLACE`): of concurrent registrations of one email exactly one stores its hash.
    public func addPasswordHash(email: String, hash: String) async throws -> Bool {
        try lock.withLock {
            guard try text("SELECT hash FROM passwords WHERE email = ?", { $0.bind(1, email) }) == nil else { return false }
            try run("INSERT INTO passwords (email, hash) VALUES (?, ?)") { $0.bind(1, email); $0.bind(2, hash) }
            return true
        }
    }

    public func replacePasswordHash(email: String, old: String, new: String) async throws -> Bool {
        try lock.withLock {
            guard try text("SELECT hash FROM passwords WHERE email = ?", { $0.bind(1, email) }) == old else { return false }
            try run("UPDATE passwords SET hash = ? WHERE email = ?") { $0.bind(1, new); $0.bind(2, email) }
            return true
        }
    }

    public func addAPIKey(userId: String, keyHash: String, name: String) async throws {
        try lock.withLock {
            try run("INSERT OR REPLACE INTO api_keys (hash, user_id, name) VALUES (?, ?, ?)") { $0.bind(1, keyHash); $0.bind(2, userId); $0.bind(3, name) }
        }
    }

    public func userId(apiKeyHash: String) async throws -> String? {
        try lock.withLock { try text("SELECT user_id FROM api_keys WHERE hash = ?") { $0.bind(1, apiKeyHash) } }
    }

    public func storeRefreshToken(hash: String, userId: String, expires: Date) async throws {
        try lock.withLock {
            try run("INSERT OR REPLACE INTO refresh_tokens (hash, user_id, expires) VALUES (?, ?, ?)") {
                $0.bind(1, hash); $0.bind(2, userId); $0.bind(3, expires.timeIntervalSince1970)
            }
        }
    }

    public func refreshTokenUser(hash: String, now: Date) async throws -> String? {
        try lock.withLock {
            try text("SELECT user_id FROM refresh_tokens WHERE hash = ? AND expires > ?") { $0.bind(1, hash); $0.bind(2, now.timeIntervalSince1970) }
        }
    }

    public func revokeRefreshToken(hash: String) async throws {
        try lock.withLock { try run("DELETE FROM refresh_tokens WHERE hash = ?") { $0.bind(1, hash) } }
    }

    public func allUsers() async throws -> [User] {
        try lock.withLock {
            let s = try db.statement("SELECT id FROM users ORDER BY id")
            var ids: [String] = []
            while try s.step() { ids.append(s.string(0)) }
            s.reset()
            return try ids.compactMap { try load($0) }
        }
    }

    public func setDisabled(userId: String, _ disabled: Bool) async throws {
        try lock.withLock { try run("UPDATE users SET disabled = ? WHERE id = ?") { $0.bind(1, Int64(disabled ? 1 : 0)); $0.bind(2, userId) } }
    }

    public func deleteUser(id: String) async throws {
        try lock.withLock {
            try db.exec("BEGIN IMMEDIATE")
            do {
                try run("DELETE FROM passwords WHERE email IN (SELECT provider_user_id FROM identities WHERE user_id = ? AND provider = 'local-userpass')") { $0.bind(1, id) }
                try run("DELETE FROM identities WHERE user_id = ?") { $0.bind(1, id) }
                try run("DELETE FROM api_keys WHERE user_id = ?") { $0.bind(1, id) }
                try run("DELETE FROM refresh_tokens WHERE user_id = ?") { $0.bind(1, id) }
                try run("DELETE FROM users WHERE id = ?") { $0.bind(1, id) }
                try db.exec("COMMIT")
            } catch {
                db.rollback()
                throw error
            }
        }
    }

    public func revokeSessions(userId: String, validAfter: Int64) async throws {
        try lock.withLock {
            try db.exec("BEGIN IMMEDIATE")
            do {
                try run("DELETE FROM refresh_tokens WHERE user_id = ?") { $0.bind(1, userId) }
                try run("UPDATE users SET sessions_valid_after = ? WHERE id = ?") { $0.bind(1, validAfter); $0.bind(2, userId) }
                try db.exec("COMMIT")
            } catch {
                db.rollback()
                throw error
            }
        }
    }
}
