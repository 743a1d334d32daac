import FerryCore
import FerrySyncStorage
import Logging
import PostgresNIO

/// The `sync_meta` counters (head, sync switch, pause, generation, state revision) and the NOTIFY
/// that tells every node they moved.
enum PostgresSyncMeta {
    /// The one channel every node of the app listens on; the payload is "head:revision:millis",
    /// millis being the database's clock when the notification was sent (for the feed's lag;
    /// nodes before it sent "head:revision", which is still read).
    static let channel = "ferry_changes"

    static func readState(_ connection: PostgresConnection, logger: Logger) async throws -> SyncState {
        let rows = try await PostgresFailure.run("reading the sync state") {
            try await connection.guardedQuery("SELECT key, value FROM sync_meta", logger: logger).collect()
        }
        return try state(rows)
    }

    static func readState(_ client: PostgresClient, logger: Logger) async throws -> SyncState {
        let rows = try await PostgresFailure.run("reading the sync state") {
            try await client.withConnection { try await $0.guardedQuery("SELECT key, value FROM sync_meta", logger: logger).collect() }
        }
        return try state(rows)
    }

    private static func state(_ rows: [PostgresRow]) throws -> SyncState {
        var values: [String: Int64] = [:]
        for row in rows {
            let (key, value) = try PostgresObjectReads.decodeRow(row, (String, Int64).self, "sync_meta")
            values[key] = value
        }
        guard let head = values["server_version"], let enabled = values["sync_enabled"], let generation = values["generation"],
              let revision = values["state_revision"] else {
            throw FerryError(.corrupt, "PostgreSQL: sync_meta lacks one of server_version, sync_enabled, generation, state_revision")
        }
        // sync_paused: made by migration 4 (a node reading a database it has not migrated yet
        // sees 0, never paused).
        return SyncState(enabled: enabled != 0, paused: (values["sync_paused"] ?? 0) != 0, generation: UInt64(bitPattern: generation), revision: UInt64(bitPattern: revision),
                         headVersion: UInt64(bitPattern: head))
    }

    /// Takes the app's write lock (the server_version row) for the rest of the transaction and
    /// returns the head under it.
    static func lockHead(_ connection: PostgresConnection, logger: Logger) async throws -> UInt64 {
        let rows = try await PostgresFailure.run("taking the app's write lock") {
            try await connection.guardedQuery("SELECT value FROM sync_meta WHERE key = 'server_version' FOR UPDATE", logger: logger).collect()
        }
        guard let row = rows.first else { throw FerryError(.corrupt, "PostgreSQL: sync_meta has no server_version row") }
        return UInt64(bitPattern: try PostgresObjectReads.decodeRow(row, Int64.self, "sync_meta"))
    }

    static func set(_ connection: PostgresConnection, _ key: String, _ value: Int64, logger: Logger) async throws {
        try await PostgresFailure.run("updating \(key)") {
            try await connection.guardedQuery("UPDATE sync_meta SET value = \(value) WHERE key = \(key)", logger: logger)
        }
    }

    /// Queues a NOTIFY of the state as this transaction leaves it; PostgreSQL delivers it only
    /// if and when the transaction commits.
    static func notify(_ connection: PostgresConnection, head: UInt64, revision: UInt64, logger: Logger) async throws {
        try await PostgresFailure.run("notifying \(channel)") {
            try await connection.guardedQuery("""
                SELECT pg_notify(\(channel), \("\(head):\(revision):") || (extract(epoch from clock_timestamp()) * 1000)::bigint)
                """, logger: logger)
        }
    }

    /// Parses a NOTIFY payload ("head:revision" or "head:revision:millis"); nil for anything else.
    static func signal(payload: String) -> FeedSignal? { notification(payload: payload)?.signal }

    /// A NOTIFY payload's signal and, when it carries one, when it was sent (milliseconds since
    /// the epoch on the database's clock).
    static func notification(payload: String) -> (signal: FeedSignal, sentMilliseconds: Int64?)? {
        let parts = payload.split(separator: ":")
        guard parts.count == 2 || parts.count == 3, let head = UInt64(parts[0]), let revision = UInt64(parts[1]) else { return nil }
        let sent = parts.count == 3 ? Int64(parts[2]) : nil
        guard parts.count == 2 || sent != nil else { return nil }
        return (FeedSignal(headVersion: head, stateRevision: revision), sent)
    }
}

extension PostgresSyncMeta {
    /// `notify` for a write transaction, which knows its head but not the revision: one round trip.
    static func notify(_ connection: PostgresConnection, head: UInt64, logger: Logger) async throws {
        try await PostgresFailure.run("notifying \(channel)") {
            try await connection.guardedQuery("""
                SELECT pg_notify(\(channel), \(String(head)) || ':' || (SELECT value FROM sync_meta WHERE key = 'state_revision')
                    || ':' || (extract(epoch from clock_timestamp()) * 1000)::bigint)
                """, logger: logger)
        }
    }
}
