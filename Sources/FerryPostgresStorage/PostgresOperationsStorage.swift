import FerryCore
import FerrySyncStorage
import Logging
import PostgresNIO

/// The operations data (`OperationsStorage`) in the shared database (migration 2), so every
/// node reads the same sync log and the connections of every node. Over the store's pool:
/// the server writes it in batches off the sync path (`SyncLogRecorder`).
public final class PostgresOperationsStorage: OperationsStorage, TriggerStorage, Sendable {
    private let client: PostgresClient
    private let logger: Logger

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    private func rows(_ what: String, _ query: PostgresQuery) async throws -> [PostgresRow] {
        try await PostgresFailure.run(what) {
            let lease = try await BoundedLease.lease(from: client, within: PostgresSyncStorage.leaseDeadline)
            defer { lease.release() }
            return try await lease.connection.guardedQuery(query, logger: logger).collect()
        }
    }

    private func transaction(_ what: String, _ body: (PostgresConnection) async throws -> Void) async throws {
        try await PostgresFailure.run(what) {
            let lease = try await BoundedLease.lease(from: client, within: PostgresSyncStorage.leaseDeadline)
            defer { lease.release() }
            try await PostgresTransaction.run(lease.connection, logger: logger) { try await body(lease.connection) }
        }
    }

    public func appendSyncLog(_ entries: [SyncLogEntry]) async throws {
        guard !entries.isEmpty else { return }
        // One INSERT of arrays (unnest keeps the order, so ids follow it).
        let times = entries.map(\.timeMilliseconds), kinds = entries.map(\.kind.rawValue), users = entries.map(\.userId)
        let nodes = entries.map(\.node), connections = entries.map { Int64(bitPattern: $0.connectionId) }
        let messages = entries.map(\.message), details = entries.map(\.details)
        _ = try await rows("writing \(entries.count) sync log entries", """
            INSERT INTO sync_log (time, kind, user_id, node, connection_id, message, details)
            SELECT a, b, c, d, e, f, g FROM unnest(\(times)::bigint[], \(kinds)::text[], \(users)::text[], \(nodes)::text[], \(connections)::bigint[],
                \(messages)::text[], \(details)::text[]) WITH ORDINALITY AS t(a, b, c, d, e, f, g, n) ORDER BY n
            """)
    }

    public func syncLog(_ query: SyncLogQuery) async throws -> [SyncLogEntry] {
        let anyUser = query.userId == nil, user = query.userId ?? ""
        let anyKind = query.kinds.isEmpty, kinds = query.kinds.map(\.rawValue)
        let since = query.sinceMilliseconds ?? Int64.min, until = query.untilMilliseconds ?? Int64.max
        let before = query.beforeId ?? Int64.max, limit = Int64(max(0, query.limit))
        let found = try await rows("reading the sync log", """
            SELECT id, time, kind, user_id, node, connection_id, message, details FROM sync_log
            WHERE (\(anyUser) OR user_id = \(user)) AND (\(anyKind) OR kind = ANY(\(kinds)::text[]))
                AND time >= \(since) AND time < \(until) AND id < \(before)
            ORDER BY id DESC LIMIT \(limit)
            """)
        return try found.compactMap { row in
            let (id, time, kind, userId, node, connection, message, details) = try PostgresObjectReads.decodeRow(
                row, (Int64, Int64, String, String, String, Int64, String, String).self, "sync_log")
            // A kind this version does not know (written by a newer node) is skipped.
            guard let k = SyncLogKind(rawValue: kind) else { return nil }
            return SyncLogEntry(id: id, timeMilliseconds: time, kind: k, userId: userId, node: node, connectionId: UInt64(bitPattern: connection),
                                message: message, details: details)
        }
    }

    public func trimSyncLog(_ retention: SyncLogRetention, users: [String]?, nowMilliseconds: Int64) async throws -> Int {
        let oldest = nowMilliseconds - retention.maxAgeMilliseconds
        let keep = Int64(max(0, retention.maxEntriesPerUser))
        var removed = try await rows("trimming the sync log by age", "DELETE FROM sync_log WHERE time < \(oldest) RETURNING 1").count
        if let users {
            for user in Set(users) {
                removed += try await rows("trimming user \(user)'s sync log", """
                    DELETE FROM sync_log WHERE user_id = \(user) AND id <= (SELECT id FROM sync_log WHERE user_id = \(user)
                        ORDER BY id DESC LIMIT 1 OFFSET \(keep)) RETURNING 1
                    """).count
            }
        } else {
            removed += try await rows("trimming the sync log per user", """
                DELETE FROM sync_log WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY user_id ORDER BY id DESC) AS n
                    FROM sync_log) AS ranked WHERE n > \(keep)) RETURNING 1
                """).count
        }
        return removed
    }

    public func publishConnections(node: String, _ connections: [LiveConnectionRecord], nowMilliseconds: Int64) async throws {
        let ids = connections.map { Int64(bitPattern: $0.connectionId) }, users = connections.map(\.userId)
        // Arrays of optionals do not encode: -1 and "" stand for NULL.
        let files = connections.map { $0.clientFile.map { Int64(bitPattern: $0) } ?? -1 }, sdks = connections.map { $0.sdk ?? "" }
        let since = connections.map(\.connectedSinceMilliseconds), up = connections.map(\.bytesUp), down = connections.map(\.bytesDown)
        let sessions = connections.map { Int64($0.sessions) }
        try await transaction("publishing node \(node)'s connections") { connection in
            _ = try await connection.guardedQuery("DELETE FROM live_connections WHERE node = \(node)", logger: logger)
            guard !connections.isEmpty else { return }
            _ = try await connection.guardedQuery("""
                INSERT INTO live_connections (node, connection_id, user_id, client_file, sdk, connected_since, bytes_up, bytes_down, sessions, published)
                SELECT \(node), a, b, NULLIF(c, -1), NULLIF(d, ''), e, f, g, h::int, \(nowMilliseconds) FROM unnest(\(ids)::bigint[], \(users)::text[], \(files)::bigint[],
                    \(sdks)::text[], \(since)::bigint[], \(up)::bigint[], \(down)::bigint[], \(sessions)::bigint[]) AS t(a, b, c, d, e, f, g, h)
                """, logger: logger)
        }
    }

    public func liveConnections(freshSinceMilliseconds: Int64) async throws -> [LiveConnectionRecord] {
        _ = try await rows("forgetting the connections of nodes gone", "DELETE FROM live_connections WHERE published < \(freshSinceMilliseconds)")
        let found = try await rows("reading the live connections", """
            SELECT node, connection_id, user_id, client_file, sdk, connected_since, bytes_up, bytes_down, sessions FROM live_connections
            ORDER BY node, connection_id
            """)
        return try found.map { row in
            let (node, id, user, file, sdk, since, up, down, sessions) = try PostgresObjectReads.decodeRow(
                row, (String, Int64, String, Int64?, String?, Int64, Int64, Int64, Int32).self, "live_connections")
            return LiveConnectionRecord(node: node, connectionId: UInt64(bitPattern: id), userId: user, clientFile: file.map { UInt64(bitPattern: $0) },
                                        sdk: sdk, connectedSinceMilliseconds: since, bytesUp: up, bytesDown: down, sessions: Int(sessions))
        }
    }

    // MARK: triggers

    private static func triggerState(_ row: PostgresRow) throws -> TriggerState {
        let (name, cursor, failures, paused, error, holder, until, delivered) = try PostgresObjectReads.decodeRow(
            row, (String, Int64, Int32, Bool, String?, String?, Int64, Int64).self, "triggers")
        return TriggerState(name: name, cursor: UInt64(bitPattern: cursor), failures: Int(failures), paused: paused, lastError: error, holder: holder,
                            leaseUntilMilliseconds: until, delivered: delivered)
    }

    public func triggerStates() async throws -> [TriggerState] {
        try await rows("reading the triggers", """
            SELECT name, cursor, failures, paused, last_error, holder, lease_until, delivered FROM triggers ORDER BY name
            """).map(Self.triggerState)
    }

    public func leaseTrigger(_ name: String, node: String, nowMilliseconds: Int64, untilMilliseconds: Int64, cursor: UInt64) async throws -> TriggerState? {
        let start = Int64(bitPattern: cursor)
        // One statement: a new row with the lease, or the lease taken when free, expired or ours.
        return try await rows("leasing trigger \(name)", """
            INSERT INTO triggers AS t (name, cursor, holder, lease_until) VALUES (\(name), \(start), \(node), \(untilMilliseconds))
            ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
                WHERE t.holder IS NULL OR t.holder = excluded.holder OR t.lease_until < \(nowMilliseconds)
            RETURNING name, cursor, failures, paused, last_error, holder, lease_until, delivered
            """).first.map(Self.triggerState)
    }

    public func recordTrigger(_ name: String, node: String, _ p: TriggerProgress) async throws -> Bool {
        let failures = Int32(clamping: p.failures)
        return try await !rows("recording trigger \(name)'s delivery", """
            UPDATE triggers SET cursor = \(Int64(bitPattern: p.cursor)), failures = \(failures), paused = \(p.paused), last_error = \(p.lastError),
                delivered = delivered + \(p.delivered)
            WHERE name = \(name) AND holder = \(node) RETURNING 1
            """).isEmpty
    }

    public func resumeTrigger(_ name: String) async throws -> Bool {
        try await !rows("resuming trigger \(name)", "UPDATE triggers SET paused = false, failures = 0 WHERE name = \(name) RETURNING 1").isEmpty
    }

    /// The pool belongs to the backend (`PostgresBackend.close`).
    public func closeOperations() async {}
}
