import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import PostgresNIO

/// The inside of one PostgreSQL write transaction (see `SyncStorage.writeTransaction`): every
/// call runs on the transaction's one connection, which holds the app's write lock.
final class PostgresWriteTransaction: SyncWriteTransaction, @unchecked Sendable {
    /// Rows per INSERT of `write`: one statement for a typical upload, bounded for a huge one.
    static let insertBatch = 1_000

    private let connection: PostgresConnection
    private let logger: Logger
    private let lock = NSLock()
    private var _newHead: UInt64
    private var _written = 0
    private var _failed = false
    private var _ended = false

    init(connection: PostgresConnection, logger: Logger, headVersion: UInt64) {
        self.connection = connection
        self.logger = logger
        _newHead = headVersion
    }

    /// The head as this transaction sees it: read under the lock, moved by each `write` that
    /// stores objects.
    var headVersion: UInt64 { lock.withLock { _newHead } }
    /// The head after the writes (the head read under the lock if nothing was written).
    var newHead: UInt64 { headVersion }
    /// How many objects the writes stored.
    var written: Int { lock.withLock { _written } }
    /// Whether a statement failed: PostgreSQL then turns COMMIT into a rollback, so the
    /// transaction must not report success even if the body swallowed the error.
    var failed: Bool { lock.withLock { _failed } }

    /// Called when the body returned: records the new head and tells every node (the
    /// NOTIFY is delivered after COMMIT), once for all the transaction's writes (group
    /// commit); then the connection goes back to the pool, so later calls fail.
    func finish(readHead: UInt64) async throws {
        let head = newHead
        if head > readHead {
            try await onConnection {
                try await PostgresSyncMeta.set(connection, "server_version", Int64(bitPattern: head), logger: logger)
                try await PostgresSyncMeta.notify(connection, head: head, logger: logger)
            }
        }
        end()
    }

    /// The connection goes back to the pool: later calls fail.
    func end() { lock.withLock { _ended = true } }

    private func onConnection<T>(_ body: () async throws -> T) async throws -> T {
        guard !lock.withLock({ _ended }) else {
            throw FerryError(.notInTransaction, "PostgreSQL: a write transaction was used after it ended")
        }
        do { return try await body() } catch {
            lock.withLock { _failed = true }
            throw error
        }
    }

    func clientFile(_ ident: UInt64) async throws -> ClientFileRecord? {
        try await onConnection { try await PostgresClientFiles.clientFile(connection, ident, logger: logger) }
    }

    func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject] {
        try await onConnection { try await PostgresObjectReads.objects(connection, keys, schema: schema, logger: logger) }
    }

    func write(objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64) async throws -> UInt64 {
        try await onConnection {
            let head = headVersion
            let version = objects.isEmpty ? head : head + 1
            let v = Int64(bitPattern: version)
            let entries = Array(objects)
            for start in stride(from: 0, to: entries.count, by: Self.insertBatch) {
                let batch = entries[start..<min(start + Self.insertBatch, entries.count)]
                // postgres-nio arrays cannot hold NULL, so an empty bytea stands for NULL
                // (every stored encoding has at least its count byte).
                var tables: [String] = [], pks: [ByteBuffer] = [], docs: [ByteBuffer] = [], lists: [ByteBuffer] = [], erased: [ByteBuffer] = []
                for (key, stored) in batch {
                    tables.append(key.table)
                    pks.append(ValueCodec.encode(key.key).buffer)
                    docs.append(stored.object.map { $0.encode().buffer } ?? ByteBuffer())
                    if stored.lists.entries.isEmpty { lists.append(ByteBuffer()) } else {
                        var w = ByteWriter()
                        stored.lists.encode(into: &w)
                        lists.append(w.bytes.buffer)
                    }
                    if stored.object == nil, let e = stored.erasedState { erased.append(e.encode().buffer) } else { erased.append(ByteBuffer()) }
                }
                try await PostgresFailure.run("writing \(batch.count) objects at version \(version)") {
                    try await connection.guardedQuery("""
                        INSERT INTO objects (tbl, pk, version, doc, lists, erased_doc)
                        SELECT t, p, \(v), NULLIF(d, ''::bytea), NULLIF(l, ''::bytea), NULLIF(e, ''::bytea)
                        FROM unnest(\(tables)::text[], \(pks)::bytea[], \(docs)::bytea[], \(lists)::bytea[], \(erased)::bytea[]) AS u(t, p, d, l, e)
                        ON CONFLICT (tbl, pk) DO UPDATE SET version = excluded.version, doc = excluded.doc, lists = excluded.lists,
                            erased_doc = excluded.erased_doc
                        """, logger: logger)
                }
            }
            try await PostgresFailure.run("recording client file \(clientFile)'s version \(clientVersion)") {
                try await connection.guardedQuery("""
                    UPDATE client_files SET acked = greatest(acked, \(Int64(bitPattern: clientVersion))),
                        last_seen = \(Int64(ServerClock.secondsSinceEpoch())) WHERE ident = \(Int64(bitPattern: clientFile))
                    """, logger: logger)
            }
            lock.withLock { _newHead = version; _written += objects.count }
            return version
        }
    }
}
