import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import PostgresNIO

/// The production store: the app's objects, history head, client files and sync state in one
/// PostgreSQL database that several nodes share. Ordering is PostgreSQL's: a write transaction
/// takes the `server_version` row of `sync_meta` FOR UPDATE (the app's write lock, across all
/// nodes), reads the head under it and writes at head + 1, so versions are assigned only inside
/// the transaction that commits them. Every commit that moves the head or the sync state sends
/// a NOTIFY (delivered at commit) that the other nodes' change feeds hear. Opened by
/// `PostgresBackend`, which owns the connection pool.
public final class PostgresSyncStorage: SyncStorage, @unchecked Sendable {
    let client: PostgresClient
    let logger: Logger
    private let location: PostgresLocation
    private let feed: PostgresChangeFeed
    private let stopClient: @Sendable () async -> Void
    private let turn = TurnQueue()
    private let lock = ThreadLock()
    private var closed = false
    /// Objects written since the planner's statistics were last refreshed (see
    /// `analyzeAfterBulkWrites`).
    private var writtenSinceAnalyze = 0
    /// Objects this node had written when it last refreshed them.
    private var writtenBeforeAnalyze = 0
    /// The app's classes as SQL tables, written with each upload (nil: not kept).
    private var sqlTables: PostgresSQLTables?

    public var description: String { "PostgreSQL \(location.hostAndPort)/\(location.database)" }
    public var changeFeed: any ChangeFeed { feed }
    /// How late this node heard the last commit notification (`PostgresChangeFeed.lagSeconds`).
    public var changeFeedLagSeconds: Double? { feed.lagSeconds }

    /// Snapshots take at most half the pool (`TurnQueue`).
    private let snapshotSlots: TurnQueue

    init(client: PostgresClient, location: PostgresLocation, logger: Logger, initial: SyncState, maximumConnections: Int, feedPollInterval: Duration,
         stopClient: @escaping @Sendable () async -> Void) {
        self.client = client
        snapshotSlots = TurnQueue(maximumConnections / 2)
        self.location = location
        self.logger = logger
        self.stopClient = stopClient
        feed = PostgresChangeFeed(client: client, logger: logger,
                                  initial: FeedSignal(headVersion: initial.headVersion, stateRevision: initial.revision),
                                  pollInterval: feedPollInterval)
        feed.start()
    }

    // MARK: Connections

    /// How long an operation waits for a pooled connection before it fails (see `BoundedLease`).
    static let leaseDeadline: Duration = .seconds(5)

    private func checkOpen() throws {
        guard !lock.withLock({ closed }) else { throw FerryError(.closed, "the PostgreSQL store \(location) is closed") }
    }

    /// Runs `body` on a leased connection.
    @discardableResult
    func withConnection<T: Sendable>(_ what: String, deadline: Duration = ConnectionWatchdog.defaultDeadline,
                                             _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try checkOpen()
        do {
            let lease = try await BoundedLease.lease(from: client, within: Self.leaseDeadline)
            defer { lease.release() }
            return try await ConnectionWatchdog.run(lease.connection, deadline: deadline, what: what, logger: logger) { try await body(lease.connection) }
        } catch {
            throw PostgresFailure.wrap(what, error)
        }
    }

    /// Runs `body` in a READ COMMITTED transaction on a leased connection.
    private func inTransaction<T: Sendable>(_ what: String, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await withConnection(what) { connection in
            try await PostgresTransaction.run(connection, logger: logger) { try await body(connection) }
        }
    }

    private func execute(_ what: String, _ query: PostgresQuery) async throws {
        try await withConnection(what) { try await $0.guardedQuery(query, logger: logger) }
    }

    // MARK: Sync state

    public func syncState() async throws -> SyncState {
        try await withConnection("reading the sync state") { try await PostgresSyncMeta.readState($0, logger: logger) }
    }

    public func setSyncEnabled(_ enabled: Bool) async throws -> SyncState {
        try await change(enabled ? .enable : .terminate, enabled ? "enabling sync" : "terminating sync")
    }

    public func setSyncPaused(_ paused: Bool) async throws -> SyncState {
        try await change(paused ? .pause : .resume, paused ? "pausing sync" : "resuming sync")
    }

    private func change(_ action: SyncState.AdminAction, _ what: String) async throws -> SyncState {
        let state = try await inTransaction(what) { connection -> SyncState in
            // The write lock too: an enable forgets the client files, which no upload may be
            // acknowledging at the same time (as in the SQLite store, where writers take turns).
            _ = try await PostgresSyncMeta.lockHead(connection, logger: logger)
            try await connection.guardedQuery("SELECT 1 FROM sync_meta WHERE key = 'state_revision' FOR UPDATE", logger: logger)
            let state = try await PostgresSyncMeta.readState(connection, logger: logger)
            guard let (next, forgets) = state.after(action) else { return state }
            if forgets { try await connection.guardedQuery("DELETE FROM client_files", logger: logger) }
            try await PostgresSyncMeta.set(connection, "generation", Int64(bitPattern: next.generation), logger: logger)
            try await PostgresSyncMeta.set(connection, "sync_enabled", next.enabled ? 1 : 0, logger: logger)
            try await PostgresSyncMeta.set(connection, "sync_paused", next.paused ? 1 : 0, logger: logger)
            try await PostgresSyncMeta.set(connection, "state_revision", Int64(bitPattern: next.revision), logger: logger)
            try await PostgresSyncMeta.notify(connection, head: next.headVersion, revision: next.revision, logger: logger)
            return next
        }
        feed.publish(headVersion: state.headVersion, stateRevision: state.revision)
        return state
    }

    public func bumpStateRevision() async throws {
        let state = try await inTransaction("growing the state revision") { connection -> SyncState in
            try await connection.guardedQuery("UPDATE sync_meta SET value = value + 1 WHERE key = 'state_revision'", logger: logger)
            let state = try await PostgresSyncMeta.readState(connection, logger: logger)
            try await PostgresSyncMeta.notify(connection, head: state.headVersion, revision: state.revision, logger: logger)
            return state
        }
        feed.publish(headVersion: state.headVersion, stateRevision: state.revision)
    }

    public func sharedSecret(named name: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await withConnection("reading the shared secret \(name)") { connection in
            func stored() async throws -> [UInt8]? {
                let rows = try await connection.guardedQuery("SELECT value FROM secrets WHERE name = \(name)", logger: logger).collect()
                return try rows.first.map { try PostgresObjectReads.decodeRow($0, ByteBuffer.self, "secrets").bytes }
            }
            if let value = try await stored() { return value }
            // Of nodes racing here, the first insert wins and every node returns its value.
            try await connection.guardedQuery("INSERT INTO secrets (name, value) VALUES (\(name), \(create().buffer)) ON CONFLICT (name) DO NOTHING",
                                       logger: logger)
            guard let value = try await stored() else { throw FerryError(.io, "PostgreSQL: the shared secret \(name) vanished after it was stored") }
            return value
        }
    }

    // MARK: Client files

    public func newClientFile(userId: String) async throws -> ClientFileRecord {
        let salt = UInt64.random(in: 1...UInt64(Int64.max))
        let now = Int(WallClock.system.secondsSinceEpoch())
        let ident = try await withConnection("creating a client file for user \(userId)") { connection -> Int64 in
            let rows = try await connection.guardedQuery("""
                INSERT INTO client_files (salt, user_id, last_seen, bound_version)
                VALUES (\(Int64(bitPattern: salt)), \(userId), \(Int64(now)), (SELECT value FROM sync_meta WHERE key = 'server_version')) RETURNING ident
                """, logger: logger).collect()
            guard let row = rows.first else { throw FerryError(.io, "PostgreSQL: could not allocate a client file") }
            return try PostgresObjectReads.decodeRow(row, Int64.self, "client_files")
        }
        return ClientFileRecord(ident: UInt64(bitPattern: ident), salt: salt, userId: userId, acknowledgedClientVersion: 0,
                                subscriptionVersion: 0, subscriptions: [], lastSeen: now)
    }

    public func clientFile(_ ident: UInt64) async throws -> ClientFileRecord? {
        try await withConnection("reading client file \(ident)") { try await PostgresClientFiles.clientFile($0, ident, logger: logger) }
    }

    public func saveSubscriptions(clientFile ident: UInt64, version: UInt64, subscriptions: [Subscription]) async throws {
        try await execute("saving client file \(ident)'s subscriptions", """
            UPDATE client_files SET sub_version = \(Int64(bitPattern: version)), subs = \(SubscriptionCodec.encode(subscriptions).buffer)
            WHERE ident = \(Int64(bitPattern: ident))
            """)
    }

    public func clientFileCount(userId: String) async throws -> Int {
        try await withConnection("counting user \(userId)'s client files") { connection -> Int in
            let rows = try await connection.guardedQuery("SELECT count(*) FROM client_files WHERE user_id = \(userId)", logger: logger).collect()
            guard let row = rows.first else { return 0 }
            let count: Int64 = try PostgresObjectReads.decodeRow(row, Int64.self, "client_files")
            return Int(count)
        }
    }

    public func forgetLeastRecentClientFile(userId: String) async throws {
        try await execute("forgetting user \(userId)'s least recent client file", """
            DELETE FROM client_files WHERE ident = (SELECT ident FROM client_files WHERE user_id = \(userId)
                ORDER BY last_seen, ident LIMIT 1)
            """)
    }

    public func forgetClientFile(_ ident: UInt64) async throws {
        try await execute("forgetting client file \(ident)", "DELETE FROM client_files WHERE ident = \(Int64(bitPattern: ident))")
    }

    public func clientFileBound(_ ident: UInt64, at secondsSinceEpoch: Int, serverVersion: UInt64) async throws {
        try await execute("recording that client file \(ident) bound", """
            UPDATE client_files SET last_seen = \(Int64(secondsSinceEpoch)), bound_version = \(Int64(bitPattern: serverVersion))
            WHERE ident = \(Int64(bitPattern: ident))
            """)
    }

    /// Compare and set: the ledger is replaced only if no upload changed it since it was read.
    public func forgetAnsweredRefusals(clientFile ident: UInt64, answeredThrough: UInt64) async throws {
        guard let bytes = try await clientFile(ident)?.refusalBytes,
              let after = RefusalLedger.forgettingAnswered(stored: bytes, through: answeredThrough) else { return }
        let id = Int64(bitPattern: ident)
        let old = bytes.buffer
        if after.isEmpty {
            try await execute("forgetting client file \(ident)'s answered refusals",
                              "UPDATE client_files SET refusals = NULL WHERE ident = \(id) AND refusals = \(old)")
        } else {
            try await execute("forgetting client file \(ident)'s answered refusals",
                              "UPDATE client_files SET refusals = \(after.encoded.buffer) WHERE ident = \(id) AND refusals = \(old)")
        }
    }

    public func oldestBoundVersion() async throws -> UInt64? {
        try await withConnection("reading the oldest bound version") { connection -> UInt64? in
            let rows = try await connection.guardedQuery("SELECT min(bound_version) FROM client_files", logger: logger).collect()
            guard let row = rows.first else { return nil }
            let v: Int64? = try PostgresObjectReads.decodeRow(row, Int64?.self, "client_files")
            return v.map { UInt64(bitPattern: $0) }
        }
    }

    public func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) async throws {
        try await execute("recording that client file \(ident) was seen",
                          "UPDATE client_files SET last_seen = \(Int64(secondsSinceEpoch)) WHERE ident = \(Int64(bitPattern: ident))")
    }

    // MARK: Objects and history

    public func object(_ key: ObjectKey, schema: ObjectSchema) async throws -> StoredObject? {
        try await withConnection("reading a \(key.table) object") { try await PostgresObjectReads.object($0, key, schema: schema, logger: logger) }
    }

    public func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject] {
        guard !keys.isEmpty else { return [:] }
        return try await withConnection("reading \(keys.count) objects") { try await PostgresObjectReads.objects($0, keys, schema: schema, logger: logger) }
    }

    /// Writers of this node take turns (`TurnQueue`) before they lease a connection; across
    /// nodes, the `server_version` row lock orders them.
    public func writeTransaction<T: Sendable>(_ body: @Sendable (any SyncWriteTransaction) async throws -> T) async throws -> T {
        let (result, head, written) = try await turn.run { try await withConnection("a write transaction") { connection -> (T, UInt64, Int) in
            try await PostgresTransaction.run(connection, logger: logger) { () -> (T, UInt64, Int) in
                let head = try await PostgresSyncMeta.lockHead(connection, logger: logger)
                let tx = PostgresWriteTransaction(connection: connection, logger: logger, headVersion: head, tables: lock.withLock { sqlTables })
                defer { tx.end() }
                let result = try await body(tx)
                if !tx.failed { try await tx.finish(readHead: head) }
                if tx.failed {
                    throw FerryError(.io, "PostgreSQL: a statement of the write transaction failed, so it was rolled back")
                }
                return (result, tx.newHead, tx.written)
            }
        } }
        feed.publish(headVersion: head)
        analyzeAfterBulkWrites(written)
        return result
    }

    /// Creates, migrates (or, with `rebuild`, makes again) the app's SQL tables under the
    /// app's write lock, then keeps them written with every upload from now on. Every node
    /// of a cluster prepares them at its start; the first does the work.
    public func prepareSQLTables(_ tables: PostgresSQLTables, rebuild: Bool) async throws -> [String: PostgresSQLTables.Preparation] {
        let done = try await turn.run {
            try await inTransaction("preparing the SQL tables in schema \(tables.schemaName)") { connection in
                _ = try await PostgresSyncMeta.lockHead(connection, logger: logger)
                let done = try await tables.prepare(connection, rebuild: rebuild, logger: logger)
                // The inbox is in the schema the server's own tables are in.
                let rows = try await connection.guardedQuery("SELECT current_schema(), session_user::text", logger: logger).collect()
                let current: (String?, String)? = try rows.first.map { row in try row.decode((String?, String).self) }
                guard let (schema, role) = current, let inbox = schema else {
                    throw FerryError(.invalidArgument, "PostgreSQL: the connection has no current schema (search_path) for the SQL writes' inbox")
                }
                try await tables.installCapture(connection, inboxSchema: inbox, serverRole: role, logger: logger)
                return done
            }
        }
        lock.withLock { sqlTables = tables }
        return done
    }

    /// After a bulk upload the planner has no statistics on `objects` until autovacuum looks
    /// (up to a minute): meanwhile it pages a bootstrap by scanning and sorting every row after
    /// the cursor (bench/run saw 56,000 rows/s instead of 179,000). Once 50,000 objects were
    /// written since the last time, and at least as many as this node had written before it,
    /// this node refreshes them, in the background: at 50,000, 100,000, 200,000, ... objects,
    /// as the table doubles. (Every 50,000 objects, ANALYZE took 1.5 s of PostgreSQL's 10.4 s
    /// of CPU in a 1,000,000-object upload, sampling the same 30,000 rows each time.)
    private func analyzeAfterBulkWrites(_ written: Int) {
        let due: Bool = lock.withLock {
            writtenSinceAnalyze += written
            guard writtenSinceAnalyze >= max(50_000, writtenBeforeAnalyze) else { return false }
            writtenBeforeAnalyze += writtenSinceAnalyze
            writtenSinceAnalyze = 0
            return true
        }
        guard due else { return }
        Task { [weak self] in
            do { try await self?.execute("refreshing the planner's statistics", "ANALYZE objects") } catch {
                self?.logger.warning("PostgreSQL: ANALYZE objects failed: \(error)")
            }
        }
    }

    public func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) async throws {
        try await withConnection("reading the \(schema.name) changes since version \(version)") { connection in
            try await PostgresObjectReads.changes(connection, since: version, schema: schema, logger: logger, body)
        }
    }

    public func withSnapshot<T: Sendable>(_ body: @Sendable (any SyncSnapshot) async throws -> T) async throws -> T {
        // A snapshot lives as long as its reader (a view evaluation has its own deadline).
        try await snapshotSlots.run { try await withConnection("a read snapshot", deadline: .seconds(600)) { connection in
            try await PostgresTransaction.run(connection, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger) {
                // The snapshot is fixed by this first query: the head and every later page agree.
                let head = try await PostgresSyncMeta.readState(connection, logger: logger).headVersion
                let snapshot = PostgresSyncSnapshot(connection: connection, logger: logger, version: head)
                defer { snapshot.end() }
                return try await body(snapshot)
            }
        } }
    }

    public func close() async {
        let first: Bool = lock.withLock {
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        await feed.finish()
        await stopClient()
    }
}
