import FerryCore
import FerrySyncStorage
import Logging
import Foundation
import PostgresNIO

/// A REPEATABLE READ, READ ONLY transaction on one leased connection: every page of every read
/// sees the store as of the snapshot's first query, while writers keep committing.
final class PostgresSyncSnapshot: SyncSnapshot, @unchecked Sendable {
    private let connection: PostgresConnection
    private let logger: Logger
    let version: UInt64
    private let lock = ThreadLock()
    private var ended = false

    init(connection: PostgresConnection, logger: Logger, version: UInt64) {
        self.connection = connection
        self.logger = logger
        self.version = version
    }

    /// Called when `withSnapshot`'s body returned: the connection goes back to the pool, so a
    /// snapshot kept past it must not read on it (it would read someone else's transaction).
    func end() { lock.withLock { ended = true } }

    private func checkOpen() throws {
        guard !lock.withLock({ ended }) else { throw FerryError(.closed, "PostgreSQL: a snapshot was used after withSnapshot returned") }
    }

    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) async throws -> Void) async throws {
        try checkOpen()
        try await PostgresObjectReads.forEachObject(connection, schema: schema, logger: logger, body)
    }

    func objects(of schema: ObjectSchema, after: [UInt8]?, limit: Int) async throws -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] {
        try checkOpen()
        return try await PostgresObjectReads.objects(connection, schema: schema, after: after, limit: limit, logger: logger)
    }

    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) async throws -> Void) async throws {
        try checkOpen()
        try await PostgresObjectReads.changes(connection, since: version, schema: schema, logger: logger, body)
    }
}
