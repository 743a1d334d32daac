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

    /// Rows per page: each page is read on a blocking thread, then handed to the caller's
    /// body, which may suspend between rows.
    static let pageSize = 1_000

    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) async throws -> Void) async throws {
        var after: [UInt8]?
        while true {
            let page = try await BlockingReads.run { try SQLiteObjectReads.objectsPage(db, schema: schema, after: after, limit: Self.pageSize) }
            for row in page { try await body(row.key, row.object) }
            guard page.count == Self.pageSize, let last = page.last else { return }
            after = last.rawKey
        }
    }

    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) async throws -> Void) async throws {
        var after: (version: Int64, rawKey: [UInt8])?
        while true {
            let page = try await BlockingReads.run {
                try SQLiteObjectReads.changesPage(db, since: version, schema: schema, after: after, limit: Self.pageSize)
            }
            for row in page { try await body(row.change) }
            guard page.count == Self.pageSize, let last = page.last else { return }
            after = (Int64(bitPattern: last.change.version), last.rawKey)
        }
    }
}
