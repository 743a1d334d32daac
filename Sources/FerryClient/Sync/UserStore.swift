import FerryCore
import FerrySQLite
import FerryStore

/// The App's metadata store: every user that logged in on this device with its tokens, in
/// `<base directory>/ferry-users.sqlite`, so users survive a restart and a cached user can
/// open its databases offline (SPEC F-USERCACHE).
final class UserStore {
    struct Record: Equatable {
        var id: String
        var accessToken: String
        var refreshToken: String
        var provider: String
        var loggedIn: Bool
    }

    private let db: SQLiteConnection
    /// The cache's encryption, when the App has a key (docs/encryption.md).
    private let encrypted: EncryptedConnection?

    init(directory: String, key: EncryptionKey? = nil) throws {
        let path = directory + "/ferry-users.sqlite"
        let description = "the user cache in \(directory)"
        if let key {
            let e = try EncryptedConnection(path: path, key: key, description: description)
            encrypted = e
            db = e.connection
        } else {
            encrypted = nil
            try EncryptedConnection.checkUnencrypted(path: path, description: description)
            db = try SQLiteConnection(creatingAt: path, description: description)
        }
        try db.exec("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY NOT NULL, access TEXT NOT NULL, refresh TEXT NOT NULL,
                provider TEXT NOT NULL, logged_in INTEGER NOT NULL, seq INTEGER NOT NULL);
            """)
    }

    func close() {
        db.close()
        encrypted?.close()
    }

    /// Every cached user, most recently logged in first.
    func all() throws -> [Record] {
        let s = try db.statement("SELECT id, access, refresh, provider, logged_in FROM users ORDER BY seq DESC")
        defer { s.reset() }
        var out: [Record] = []
        while try s.step() {
            out.append(Record(id: s.string(0), accessToken: s.string(1), refreshToken: s.string(2), provider: s.string(3), loggedIn: s.int64(4) != 0))
        }
        return out
    }

    /// Saves a user; `bump` makes it the most recent (a login).
    func save(_ r: Record, bump: Bool) throws {
        let s = try db.statement("""
            INSERT INTO users (id, access, refresh, provider, logged_in, seq) VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM users))
            ON CONFLICT(id) DO UPDATE SET access = excluded.access, refresh = excluded.refresh, provider = excluded.provider,
              logged_in = excluded.logged_in, seq = CASE WHEN ? THEN excluded.seq ELSE seq END
            """)
        defer { s.reset() }
        s.bind(1, r.id); s.bind(2, r.accessToken); s.bind(3, r.refreshToken); s.bind(4, r.provider)
        s.bind(5, Int64(r.loggedIn ? 1 : 0)); s.bind(6, Int64(bump ? 1 : 0))
        try s.run()
    }

    func remove(_ id: String) throws {
        let s = try db.statement("DELETE FROM users WHERE id = ?")
        defer { s.reset() }
        s.bind(1, id)
        try s.run()
    }
}
