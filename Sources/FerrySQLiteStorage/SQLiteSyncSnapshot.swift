import FerryCore
import FerrySQLite
import FerrySyncStorage

/// A read transaction on a connection of its own to `sync.sqlite`: in WAL mode it sees the
/// store as of its first read while writers keep committing. Its scans run on the blocking
/// read threads (`BlockingReads`), never on the cooperative pool.
final class SQLiteSyncSnapshot: SyncSnapshot, @unchecked Sendable {
    private let db: SQLiteConnection
    let version: UInt64

    /// Opens the connection and starts the read transaction (the snapshot is fixed by the
    /// first read, made here).
    init(path: String) throws {
        db = try SQLiteConnection(readingAt: path, description: "a snapshot of the server's sync store \(path)")
        try db.exec("BEGIN")
        let s = try db.statement("SELECT value FROM meta WHERE key = 'server_version'")
        defer { s.reset() }
        version = try s.step() ? UInt64(bitPattern: s.int64(0)) : 0
    }

    func close() {
        try? db.exec("COMMIT")
        db.close()
    }

    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) async throws {
        try await BlockingReads.run { try SQLiteObjectReads.forEachObject(db, schema: schema, body) }
    }

    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) async throws {
        try await BlockingReads.run { try SQLiteObjectReads.changes(db, since: version, schema: schema, body) }
    }
}
