import FerryCore
import FerryStore

/// A read transaction on a connection of its own to `sync.sqlite`: in WAL mode it sees the
/// store as of its first read while the hub keeps committing on the writer connection.
final class SQLiteSyncSnapshot: SyncSnapshot {
    private let db: SQLiteConnection

    /// Opens the connection and starts the read transaction (the snapshot is fixed by the
    /// first read, made here).
    init(path: String) throws {
        db = try SQLiteConnection(readingAt: path, description: "a snapshot of the server's sync store \(path)")
        try db.exec("BEGIN")
        let s = try db.statement("SELECT value FROM meta WHERE key = 'server_version'")
        defer { s.reset() }
        _ = try s.step()
    }

    func close() {
        try? db.exec("COMMIT")
        db.close()
    }

    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws {
        try SQLiteObjectReads.forEachObject(db, schema: schema, body)
    }

    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws {
        try SQLiteObjectReads.changes(db, since: version, schema: schema, body)
    }
}
