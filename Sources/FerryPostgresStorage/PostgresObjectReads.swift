import FerryCore
import FerrySyncStorage
import Logging
import PostgresNIO

/// The object reads of the PostgreSQL sync store, on any connection (a write transaction's, a
/// snapshot's, a pooled one), so all read alike and decode the same blobs as SQLite. Long
/// reads go in keyset pages (`PageSize`): memory stays flat however long the history, and no
/// server-side cursor has to outlive a page.
enum PostgresObjectReads {
    /// How many rows the next page of a long read asks for: 1,000 first, then as many as fit
    /// in about `targetBytes` at the size of the rows read so far, between `smallest` and
    /// `largest`. Each page is a query that starts a new index scan: pages of 5,000 small
    /// objects halved PostgreSQL's CPU in a 1,000,000-object bootstrap (0.96-0.97 s -> 0.53-0.65
    /// s) and took the node's from 4.6-4.8 s to 3.2-3.8 s; 10,000 gained nothing more. Large
    /// objects get small pages, so a page holds about the same bytes whatever they are.
    struct PageSize: Sendable {
        static let first = 1_000
        static let smallest = 100
        static let largest = 5_000
        static let targetBytes = 4 << 20

        private(set) var rows = Self.first
        private var seenRows = 0
        private var seenBytes = 0

        /// Takes a page's row count and bytes into account for the next one.
        mutating func read(rows count: Int, bytes: Int) {
            seenRows += count
            seenBytes += bytes
            guard seenRows > 0 else { return }
            let perRow = max(1, seenBytes / seenRows)
            rows = min(Self.largest, max(Self.smallest, Self.targetBytes / perRow))
        }
    }
    /// Keys per `pk = ANY($2)` lookup: one round trip for a typical upload, bounded for a huge one.
    static let lookupBatch = 1_000

    static func object(_ connection: PostgresConnection, _ key: ObjectKey, schema: ObjectSchema, logger: Logger) async throws -> StoredObject? {
        let rows = try await PostgresFailure.run("reading a \(key.table) object") {
            try await connection.guardedQuery("""
                SELECT doc, lists, erased_doc FROM objects WHERE tbl = \(key.table) AND pk = \(ValueCodec.encode(key.key).buffer)
                """, logger: logger).collect()
        }
        guard let row = rows.first else { return nil }
        let (doc, lists, erased) = try decodeRow(row, (ByteBuffer?, ByteBuffer?, ByteBuffer?).self, "objects")
        return try stored(doc: doc, lists: lists, erased: erased, schema: schema)
    }

    /// The stored state of each of `keys` that exists, in batches per class.
    ///
    /// A found row's key is decoded from its `pk` rather than looked up among the keys asked
    /// for: most keys of a bulk upload are new, and a dictionary of every encoded key cost
    /// more than the rest of the read.
    static func objects(_ connection: PostgresConnection, _ keys: [ObjectKey], schema: Schema, logger: Logger) async throws -> [ObjectKey: StoredObject] {
        var byTable: [String: [ByteBuffer]] = [:]
        for key in keys { byTable[key.table, default: []].append(ValueCodec.encode(key.key).buffer) }
        var out: [ObjectKey: StoredObject] = [:]
        for (table, all) in byTable {
            guard let os = schema.objectSchema(named: table) else { continue }
            for start in stride(from: 0, to: all.count, by: lookupBatch) {
                let batch = Array(all[start..<min(start + lookupBatch, all.count)])
                let rows = try await PostgresFailure.run("reading \(batch.count) \(table) objects") {
                    try await connection.guardedQuery("""
                        SELECT pk, doc, lists, erased_doc FROM objects WHERE tbl = \(table) AND pk = ANY(\(batch))
                        """, logger: logger).collect()
                }
                for row in rows {
                    let (pk, doc, lists, erased) = try decodeRow(row, (ByteBuffer, ByteBuffer?, ByteBuffer?, ByteBuffer?).self, "objects")
                    let key = ObjectKey(table: table, key: try ValueCodec.decode(pk.bytes))
                    out[key] = try stored(doc: doc, lists: lists, erased: erased, schema: os)
                }
            }
        }
        return out
    }

    /// Every live object of a class, in primary-key-bytes pages.
    static func forEachObject(_ connection: PostgresConnection, schema: ObjectSchema, logger: Logger,
                              _ body: (FerryValue, StampedObject) async throws -> Void) async throws {
        var after = ByteBuffer()  // every encoded key is longer than the empty one
        var size = PageSize()
        while true {
            let limit = size.rows
            let rows = try await PostgresFailure.run("reading the \(schema.name) objects") {
                try await connection.guardedQuery("""
                    SELECT pk, doc FROM objects WHERE tbl = \(schema.name) AND doc IS NOT NULL AND pk > \(after)
                    ORDER BY pk LIMIT \(limit)
                    """, logger: logger).collect()
            }
            var bytes = 0
            for row in rows {
                let (pk, doc) = try decodeRow(row, (ByteBuffer, ByteBuffer).self, "objects")
                bytes += pk.readableBytes + doc.readableBytes
                try await body(try ValueCodec.decode(pk.bytes), try StampedObject.decode(doc.bytes, schema: schema))
                after = pk
            }
            if rows.count < limit { return }
            size.read(rows: rows.count, bytes: bytes)
        }
    }

    /// One page of live objects of a class after the encoded key `after`, in key order.
    static func objects(_ connection: PostgresConnection, schema: ObjectSchema, after: [UInt8]?, limit: Int, logger: Logger) async throws
        -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] {
        let from = ByteBuffer(bytes: after ?? [])  // every encoded key is longer than the empty one
        let limit = max(0, limit)
        let rows = try await PostgresFailure.run("reading a page of \(schema.name) objects") {
            try await connection.guardedQuery("""
                SELECT pk, doc FROM objects WHERE tbl = \(schema.name) AND doc IS NOT NULL AND pk > \(from)
                ORDER BY pk LIMIT \(limit)
                """, logger: logger).collect()
        }
        return try rows.map { row in
            let (pk, doc) = try decodeRow(row, (ByteBuffer, ByteBuffer).self, "objects")
            let raw = pk.bytes
            return (try ValueCodec.decode(raw), try StampedObject.decode(doc.bytes, schema: schema), raw)
        }
    }

    /// The objects of a class changed after `version`, in (version, pk) pages.
    static func changes(_ connection: PostgresConnection, since version: UInt64, schema: ObjectSchema, logger: Logger,
                        _ body: (ChangedObject) async throws -> Void) async throws {
        var position: (version: Int64, pk: ByteBuffer)?
        let since = Int64(bitPattern: version)
        var size = PageSize()
        while true {
            let query: PostgresQuery
            let limit = size.rows
            if let position {
                query = """
                    SELECT pk, doc, version, erased_doc, author FROM objects WHERE tbl = \(schema.name) AND version > \(since)
                    AND (version, pk) > (\(position.version), \(position.pk)) ORDER BY version, pk LIMIT \(limit)
                    """
            } else {
                query = """
                    SELECT pk, doc, version, erased_doc, author FROM objects WHERE tbl = \(schema.name) AND version > \(since)
                    ORDER BY version, pk LIMIT \(limit)
                    """
            }
            let rows = try await PostgresFailure.run("reading the \(schema.name) changes since version \(version)") {
                try await connection.guardedQuery(query, logger: logger).collect()
            }
            var bytes = 0
            for row in rows {
                let (pk, doc, v, erased, author) = try decodeRow(row, (ByteBuffer, ByteBuffer?, Int64, ByteBuffer?, Int64?).self, "objects")
                bytes += pk.readableBytes + (doc?.readableBytes ?? 0) + (erased?.readableBytes ?? 0)
                let object = try doc.map { try StampedObject.decode($0.bytes, schema: schema) }
                let erasedState = try erased.map { try StampedObject.decode($0.bytes, schema: schema) }
                try await body(ChangedObject(key: try ValueCodec.decode(pk.bytes), object: object, erasedState: erasedState,
                                       version: UInt64(bitPattern: v), author: author.map { UInt64(bitPattern: $0) }))
                position = (v, pk)
            }
            if rows.count < limit { return }
            size.read(rows: rows.count, bytes: bytes)
        }
    }

    static func stored(doc: ByteBuffer?, lists: ByteBuffer?, erased: ByteBuffer?, schema: ObjectSchema) throws -> StoredObject {
        let object = try doc.map { try StampedObject.decode($0.bytes, schema: schema) }
        var log = ListOperationLog()
        if let lists {
            var r = ByteReader(lists.bytes)
            log = try ListOperationLog.decode(from: &r)
        }
        let erasedState = try erased.map { try StampedObject.decode($0.bytes, schema: schema) }
        return StoredObject(object: object, lists: log, erasedState: erasedState)
    }

    /// Decodes a row, reporting a column of an unexpected type as a corrupt store, not a trap.
    static func decodeRow<each C: PostgresDecodable>(_ row: PostgresRow, _ type: (repeat each C).Type, _ table: String) throws -> (repeat each C) {
        do { return try row.decode(type) } catch {
            throw FerryError(.corrupt, "PostgreSQL: a row of \(table) does not have the expected columns: \(String(reflecting: error))")
        }
    }
}
