import FerryAuth
import FerrySQLite
import FerrySQLiteStorage
import Foundation
import Testing

/// Every lookup of the embedded user directory uses an index, also in a `users.sqlite` made
/// before the index existed (issue 13: a user's identities were found by a scan of every
/// identity, twice per sync connection). PostgreSQL has had `identities_by_user` from its
/// first migration.
@Suite("Storage: user directory indexes")
struct UserDirectoryIndexTests {
    /// The queries of `SQLiteUserDirectory`, parameters as `?`.
    static let lookups = [
        "SELECT data, disabled FROM users WHERE id = ?",
        "SELECT provider, provider_user_id FROM identities WHERE user_id = ? ORDER BY provider",
        "SELECT user_id FROM identities WHERE provider = ? AND provider_user_id = ?",
        "UPDATE users SET data = ? WHERE id = ?",
        "SELECT hash FROM passwords WHERE email = ?",
        "SELECT user_id FROM api_keys WHERE hash = ?",
        "SELECT user_id FROM refresh_tokens WHERE hash = ? AND expires > ?",
        "DELETE FROM refresh_tokens WHERE hash = ?",
        "UPDATE users SET disabled = ? WHERE id = ?",
    ]

    @Test func everyLookupUsesAnIndexInAFileMadeBeforeTheIndex() throws {
        let place = try SQLitePlace.make()
        defer { place.remove() }
        let path = place.directory.appendingPathComponent("users.sqlite").path
        // The layout of the earlier servers: the same tables, no index on identities.user_id.
        let old = try SQLiteConnection(creatingAt: path, description: "an old user store")
        try old.exec("""
            CREATE TABLE users (id TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL, disabled INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE identities (provider TEXT NOT NULL, provider_user_id TEXT NOT NULL, user_id TEXT NOT NULL,
                PRIMARY KEY (provider, provider_user_id));
            CREATE TABLE passwords (email TEXT PRIMARY KEY NOT NULL, hash TEXT NOT NULL);
            CREATE TABLE api_keys (hash TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL, name TEXT NOT NULL);
            CREATE TABLE refresh_tokens (hash TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL, expires REAL NOT NULL);
            INSERT INTO identities VALUES ('anon-user', 'device-1', 'u1');
            """)
        old.close()

        let directory = try SQLiteUserDirectory(path: path)
        defer { directory.close() }
        for sql in Self.lookups {
            let plan = try directory.queryPlan(sql)
            #expect(!plan.isEmpty, "no plan for \(sql)")
            for step in plan {
                #expect(step.contains("USING INDEX") || step.contains("USING COVERING INDEX") || step.contains("USING PRIMARY KEY")
                        || step.contains("USING INTEGER PRIMARY KEY"),
                        "\(sql): \(step)")
            }
        }
        #expect(try directory.queryPlan(Self.lookups[1]).contains { $0.contains("identities_by_user") })
    }
}
