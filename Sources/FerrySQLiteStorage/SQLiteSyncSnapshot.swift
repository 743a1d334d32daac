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
        // A read-only transaction, and the connection closes next: nothing to keep.
        db.rollback()
        db.close()
    }

    /// Rows per page: each page is read on a blocking thread, then handed to the caller's
    /// body, which may suspend between rows.
    static let pageSize = 1_000

    /// The next page is read (and its objects decoded) on a blocking thread while the body
    /// runs over the current one: a bootstrap's first pass reads and judges/encodes at once,
    /// on two cores (issue 23; the device waits for that pass before its first message). Only
    /// one read is ever in flight on the connection, and the one in flight is awaited before
    /// returning or throwing (`async let`), so the connection is never used after the caller
    /// closes the snapshot.
    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) async throws -> Void) async throws {
        var page = try await objectsPage(schema: schema, after: nil)
        while true {
            let after = page.count == Self.pageSize ? page.last?.rawKey : nil
            async let next = after == nil ? nil : objectsPage(schema: schema, after: after)
            for row in page { try await body(row.key, row.object) }
            guard let following = try await next else { return }
            page = following
        }
    }

    func objects(of schema: ObjectSchema, after: [UInt8]?, limit: Int) async throws -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] {
        try await objectsPage(schema: schema, after: after, limit: max(0, limit))
    }

    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) async throws -> Void) async throws {
        var page = try await changesPage(since: version, schema: schema, after: nil)
        while true {
            let after = page.count == Self.pageSize ? page.last.map { (Int64(bitPattern: $0.change.version), $0.rawKey) } : nil
            async let next = after == nil ? nil : changesPage(since: version, schema: schema, after: after)
            for row in page { try await body(row.change) }
            guard let following = try await next else { return }
            page = following
        }
    }

    private func objectsPage(schema: ObjectSchema, after: [UInt8]?, limit: Int = pageSize) async throws -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] {
        try await BlockingReads.run { try SQLiteObjectReads.objectsPage(db, schema: schema, after: after, limit: limit) }
    }

    private func changesPage(since version: UInt64, schema: ObjectSchema, after: (version: Int64, rawKey: [UInt8])?) async throws
        -> [(change: ChangedObject, rawKey: [UInt8])] {
        try await BlockingReads.run { try SQLiteObjectReads.changesPage(db, since: version, schema: schema, after: after, limit: Self.pageSize) }
    }
}
