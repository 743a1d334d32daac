import FerryCore
import FerrySQLite
import FerrySyncStorage

/// The embedded store: one SQLite file (`sync.sqlite` in the data directory), WAL with
/// synchronous=FULL so a committed upload survives a power cut before it is acknowledged.
/// One process writes it: writers take turns (`TurnQueue`) on one connection; reads outside a
/// transaction use a second connection, so they never see a transaction that is still open;
/// snapshots open a connection each. Its change feed is in-process.
public final class SQLiteSyncStorage: SyncStorage, @unchecked Sendable {
    private let writer: SQLiteConnection
    private let writerLock = ThreadLock()
    private let reader: SQLiteConnection
    private let readerLock = ThreadLock()
    private var readerClosed = false
    private let turn = TurnQueue()
    private let path: String
    private let feed: FeedBroadcast

    public var description: String { "SQLite \(path)" }
    public var changeFeed: any ChangeFeed { feed }

    /// Snapshots open at once, at most (`TurnQueue`).
    public static let maxOpenSnapshots = 64
    private let snapshotSlots = TurnQueue(SQLiteSyncStorage.maxOpenSnapshots)

    public init(path: String) throws {
        writer = try SQLiteConnection(creatingAt: path, description: "the server's sync store \(path)")
        self.path = path
        try writer.exec("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS objects (tbl TEXT NOT NULL, pk BLOB NOT NULL, version INTEGER NOT NULL,
                doc BLOB, lists BLOB, PRIMARY KEY (tbl, pk)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS objects_by_version ON objects (tbl, version);
            CREATE TABLE IF NOT EXISTS client_files (ident INTEGER PRIMARY KEY AUTOINCREMENT, salt INTEGER NOT NULL,
                user_id TEXT NOT NULL, acked INTEGER NOT NULL DEFAULT 0, sub_version INTEGER NOT NULL DEFAULT 0,
                subs BLOB, last_seen INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL);
            INSERT OR IGNORE INTO meta VALUES ('server_version', 0);
            INSERT OR IGNORE INTO meta VALUES ('sync_enabled', 1);
            INSERT OR IGNORE INTO meta VALUES ('generation', 1);
            INSERT OR IGNORE INTO meta VALUES ('state_revision', 0);
            INSERT OR IGNORE INTO meta VALUES ('sync_paused', 0);
            """)
        // Stores made before tombstones kept their last values (see StoredObject.erasedState).
        if try !Self.hasColumn(writer, "objects", "erased_doc") { try writer.exec("ALTER TABLE objects ADD COLUMN erased_doc BLOB") }
        // The client file whose write made the row's version (the change feed's "by").
        if try !Self.hasColumn(writer, "objects", "author") { try writer.exec("ALTER TABLE objects ADD COLUMN author INTEGER") }
        try writer.exec("CREATE INDEX IF NOT EXISTS client_files_by_user ON client_files (user_id, last_seen)")
        // Stores made before the oldest bound version was kept: their files count as at 0.
        if try !Self.hasColumn(writer, "client_files", "bound_version") {
            try writer.exec("ALTER TABLE client_files ADD COLUMN bound_version INTEGER NOT NULL DEFAULT 0")
        }
        try writer.exec("CREATE INDEX IF NOT EXISTS client_files_by_bound_version ON client_files (bound_version)")
        // Stores made before refusals were kept to send again (`RefusalLedger`): none kept.
        if try !Self.hasColumn(writer, "client_files", "refusals") { try writer.exec("ALTER TABLE client_files ADD COLUMN refusals BLOB") }
        reader = try SQLiteConnection(readingAt: path, description: "the server's sync store \(path)")
        let state = try Self.readState(writer)
        feed = FeedBroadcast(initial: FeedSignal(headVersion: state.headVersion, stateRevision: state.revision))
    }

    private static func hasColumn(_ db: SQLiteConnection, _ table: String, _ column: String) throws -> Bool {
        let s = try db.statement("SELECT 1 FROM pragma_table_info(?) WHERE name = ?")
        defer { s.reset() }
        s.bind(1, table); s.bind(2, column)
        return try s.step()
    }

    private static func meta(_ db: SQLiteConnection, _ key: String) throws -> Int64 {
        let s = try db.statement("SELECT value FROM meta WHERE key = ?")
        defer { s.reset() }
        s.bind(1, key)
        return try s.step() ? s.int64(0) : 0
    }

    private static func setMeta(_ db: SQLiteConnection, _ key: String, _ value: Int64) throws {
        let s = try db.statement("INSERT OR REPLACE INTO meta VALUES (?, ?)")
        defer { s.reset() }
        s.bind(1, key); s.bind(2, value)
        try s.run()
    }

    private static func readState(_ db: SQLiteConnection) throws -> SyncState {
        // sync_paused: absent in stores made before pauses (0, never paused).
        SyncState(enabled: try meta(db, "sync_enabled") != 0, paused: try meta(db, "sync_paused") != 0, generation: UInt64(bitPattern: try meta(db, "generation")),
                  revision: UInt64(bitPattern: try meta(db, "state_revision")),
                  headVersion: UInt64(bitPattern: try meta(db, "server_version")))
    }

    /// Runs `body` on the writer connection in a transaction of its own, in turn with every
    /// other writer.
    private func write<T>(_ body: (SQLiteConnection) throws -> T) async throws -> T {
        try await turn.run {
            try writerLock.withLock {
                try writer.exec("BEGIN IMMEDIATE")
                do {
                    let result = try body(writer)
                    try writer.exec("COMMIT")
                    return result
                } catch {
                    writer.rollback()
                    throw error
                }
            }
        }
    }

    private func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try readerLock.withLock { try body(reader) }
    }

    // MARK: Sync state

    public func syncState() async throws -> SyncState { try read(Self.readState) }

    public func setSyncEnabled(_ enabled: Bool) async throws -> SyncState {
        try await change(enabled ? .enable : .terminate)
    }

    public func setSyncPaused(_ paused: Bool) async throws -> SyncState {
        try await change(paused ? .pause : .resume)
    }

    private func change(_ action: SyncState.AdminAction) async throws -> SyncState {
        let state = try await write { db -> SyncState in
            let state = try Self.readState(db)
            guard let (next, forgets) = state.after(action) else { return state }
            if forgets { try db.exec("DELETE FROM client_files") }
            try Self.setMeta(db, "generation", Int64(bitPattern: next.generation))
            try Self.setMeta(db, "sync_enabled", next.enabled ? 1 : 0)
            try Self.setMeta(db, "sync_paused", next.paused ? 1 : 0)
            try Self.setMeta(db, "state_revision", Int64(bitPattern: next.revision))
            return next
        }
        feed.publish(stateRevision: state.revision)
        return state
    }

    public func bumpStateRevision() async throws {
        let revision = try await write { db -> UInt64 in
            let r = UInt64(bitPattern: try Self.meta(db, "state_revision")) + 1
            try Self.setMeta(db, "state_revision", Int64(bitPattern: r))
            return r
        }
        feed.publish(stateRevision: revision)
    }

    public func sharedSecret(named name: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        try await write { db in
            let get = try db.statement("SELECT value FROM secrets WHERE name = ?")
            defer { get.reset() }
            get.bind(1, name)
            if try get.step() { return get.blob(0) }
            get.reset()
            let value = create()
            let put = try db.statement("INSERT INTO secrets VALUES (?, ?)")
            defer { put.reset() }
            put.bind(1, name); put.bind(2, blob: value)
            try put.run()
            return value
        }
    }

    // MARK: Client files

    public func clientFileCount(userId: String) async throws -> Int {
        try read { db in
            let s = try db.statement("SELECT count(*) FROM client_files WHERE user_id = ?")
            defer { s.reset() }
            s.bind(1, userId)
            return try s.step() ? Int(s.int64(0)) : 0
        }
    }

    public func forgetLeastRecentClientFile(userId: String) async throws {
        try await write { db in
            let s = try db.statement("DELETE FROM client_files WHERE ident = (SELECT ident FROM client_files WHERE user_id = ? ORDER BY last_seen, ident LIMIT 1)")
            defer { s.reset() }
            s.bind(1, userId)
            try s.run()
        }
    }

    public func forgetClientFile(_ ident: UInt64) async throws {
        try await write { db in
            let s = try db.statement("DELETE FROM client_files WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) async throws {
        try await write { db in
            let s = try db.statement("UPDATE client_files SET last_seen = ? WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(secondsSinceEpoch)); s.bind(2, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func clientFileBound(_ ident: UInt64, at secondsSinceEpoch: Int, serverVersion: UInt64) async throws {
        try await write { db in
            let s = try db.statement("UPDATE client_files SET last_seen = ?, bound_version = ? WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(secondsSinceEpoch)); s.bind(2, Int64(bitPattern: serverVersion)); s.bind(3, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func forgetAnsweredRefusals(clientFile ident: UInt64, answeredThrough: UInt64) async throws {
        try await write { db in
            guard let bytes = try Self.clientFile(db, ident)?.refusalBytes,
                  let after = RefusalLedger.forgettingAnswered(stored: bytes, through: answeredThrough) else { return }
            let s = try db.statement("UPDATE client_files SET refusals = ? WHERE ident = ?")
            defer { s.reset() }
            if after.isEmpty { s.bindNull(1) } else { s.bind(1, blob: after.encoded) }
            s.bind(2, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func oldestBoundVersion() async throws -> UInt64? {
        try read { db in
            let s = try db.statement("SELECT min(bound_version) FROM client_files")
            defer { s.reset() }
            guard try s.step(), !s.isNull(0) else { return nil }
            return UInt64(bitPattern: s.int64(0))
        }
    }

    public func newClientFile(userId: String) async throws -> ClientFileRecord {
        try await write { db in
            let salt = UInt64.random(in: 1...UInt64(Int64.max))
            let now = Int(WallClock.system.secondsSinceEpoch())
            let s = try db.statement("""
                INSERT INTO client_files (salt, user_id, last_seen, bound_version)
                VALUES (?, ?, ?, (SELECT value FROM meta WHERE key = 'server_version')) RETURNING ident
                """)
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: salt)); s.bind(2, userId); s.bind(3, Int64(now))
            guard try s.step() else { throw FerryError(.io, "could not allocate a client file") }
            return ClientFileRecord(ident: UInt64(bitPattern: s.int64(0)), salt: salt, userId: userId,
                                    acknowledgedClientVersion: 0, subscriptionVersion: 0, subscriptions: [], lastSeen: now)
        }
    }

    static func clientFile(_ db: SQLiteConnection, _ ident: UInt64) throws -> ClientFileRecord? {
        let s = try db.statement("SELECT salt, user_id, acked, sub_version, subs, last_seen, refusals FROM client_files WHERE ident = ?")
        defer { s.reset() }
        s.bind(1, Int64(bitPattern: ident))
        guard try s.step() else { return nil }
        let subs = s.isNull(4) ? [] : try SubscriptionCodec.decode(s.blob(4))
        var record = ClientFileRecord(ident: ident, salt: UInt64(bitPattern: s.int64(0)), userId: s.string(1),
                                      acknowledgedClientVersion: UInt64(bitPattern: s.int64(2)),
                                      subscriptionVersion: UInt64(bitPattern: s.int64(3)), subscriptions: subs, lastSeen: Int(s.int64(5)))
        if !s.isNull(6) { record.refusalBytes = s.blob(6) }
        return record
    }

    /// `SyncWriteTransaction.recordRefusals` on the writer, inside its transaction.
    static func recordRefusals(_ db: SQLiteConnection, clientFile ident: UInt64, through: UInt64, writes: [CompensatingWrite]) throws {
        guard !writes.isEmpty, var ledger = try clientFile(db, ident)?.refusalsToExtend else { return }
        ledger.record(through: through, writes: writes)
        let s = try db.statement("UPDATE client_files SET refusals = ? WHERE ident = ?")
        defer { s.reset() }
        s.bind(1, blob: ledger.encoded); s.bind(2, Int64(bitPattern: ident))
        try s.run()
    }

    public func clientFile(_ ident: UInt64) async throws -> ClientFileRecord? {
        try read { try Self.clientFile($0, ident) }
    }

    public func saveSubscriptions(clientFile ident: UInt64, version: UInt64, subscriptions: [Subscription]) async throws {
        try await write { db in
            let s = try db.statement("UPDATE client_files SET sub_version = ?, subs = ? WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: version)); s.bind(2, blob: SubscriptionCodec.encode(subscriptions)); s.bind(3, Int64(bitPattern: ident))
            try s.run()
        }
    }

    // MARK: Objects and history

    public func object(_ key: ObjectKey, schema: ObjectSchema) async throws -> StoredObject? {
        try read { try SQLiteObjectReads.object($0, key, schema: schema) }
    }

    /// One read transaction for all the keys: the objects come from one snapshot, and SQLite
    /// takes its WAL read lock once instead of once per key (in autocommit, each `SELECT` took
    /// and dropped it: two `fcntl` calls per object of an upload's premerge, issue 23).
    public func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject] {
        try read { db in
            try db.exec("BEGIN")
            do {
                var out: [ObjectKey: StoredObject] = [:]
                for k in keys {
                    guard out[k] == nil, let os = schema.objectSchema(named: k.table) else { continue }
                    if let o = try SQLiteObjectReads.object(db, k, schema: os) { out[k] = o }
                }
                try db.exec("COMMIT")
                return out
            } catch {
                // Ending a read-only transaction only releases a read lock: no other connection
                // can refuse it (no busy, nothing to write back), so it fails only when SQLite
                // itself is out of memory or misused. The read's own error is thrown either way.
                db.rollback()
                throw error
            }
        }
    }

    public func writeTransaction<T: Sendable>(_ body: @Sendable (any SyncWriteTransaction) async throws -> T) async throws -> T {
        let (result, head) = try await turn.run { () async throws -> (T, UInt64) in
            let head = try writerLock.withLock { () throws -> UInt64 in
                try writer.exec("BEGIN IMMEDIATE")
                return UInt64(bitPattern: try Self.meta(writer, "server_version"))
            }
            let tx = SQLiteWriteTransaction(db: writer, lock: writerLock, headVersion: head)
            do {
                let result = try await body(tx)
                try writerLock.withLock { try writer.exec("COMMIT") }
                return (result, tx.newHead)
            } catch {
                writerLock.withLock { writer.rollback() }
                throw error
            }
        }
        feed.publish(headVersion: head)
        return result
    }

    public func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) async throws {
        try read { try SQLiteObjectReads.changes($0, since: version, schema: schema, body) }
    }

    public func withSnapshot<T: Sendable>(_ body: @Sendable (any SyncSnapshot) async throws -> T) async throws -> T {
        // A snapshot opens a connection of its own by path: refused once the store is closed,
        // like every other call.
        try readerLock.withLock { guard !readerClosed else { throw FerryError(.closed, "the sync store \(path) is closed") } }
        return try await snapshotSlots.run {
            let snapshot = try await BlockingReads.run { try SQLiteSyncSnapshot(path: path) }
            defer { snapshot.close() }
            return try await body(snapshot)
        }
    }

    public func close() async {
        feed.finish()
        await turn.run {
            writerLock.withLock { writer.close() }
            readerLock.withLock { reader.close(); readerClosed = true }
        }
    }
}

/// The inside of one SQLite write transaction (see `SyncStorage.writeTransaction`).
final class SQLiteWriteTransaction: SyncWriteTransaction, @unchecked Sendable {
    private let db: SQLiteConnection
    private let lock: ThreadLock
    /// Moved by each `write` that stores objects (only on the transaction's task).
    private(set) var headVersion: UInt64
    var newHead: UInt64 { headVersion }

    init(db: SQLiteConnection, lock: ThreadLock, headVersion: UInt64) {
        self.db = db
        self.lock = lock
        self.headVersion = headVersion
    }

    func clientFile(_ ident: UInt64) async throws -> ClientFileRecord? {
        try lock.withLock { try SQLiteSyncStorage.clientFile(db, ident) }
    }

    func recordRefusals(clientFile: UInt64, through: UInt64, writes: [CompensatingWrite]) async throws {
        try lock.withLock { try SQLiteSyncStorage.recordRefusals(db, clientFile: clientFile, through: through, writes: writes) }
    }

    func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject] {
        try lock.withLock {
            var out: [ObjectKey: StoredObject] = [:]
            for k in keys {
                guard let os = schema.objectSchema(named: k.table) else { continue }
                if let o = try SQLiteObjectReads.object(db, k, schema: os) { out[k] = o }
            }
            return out
        }
    }

    func write(objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64) async throws -> UInt64 {
        try lock.withLock {
            let version = objects.isEmpty ? headVersion : headVersion + 1
            let put = try db.statement("INSERT OR REPLACE INTO objects (tbl, pk, version, doc, lists, erased_doc, author) VALUES (?, ?, ?, ?, ?, ?, ?)")
            defer { put.reset() }
            for (table, pk, stored) in ObjectKey.inStorageOrder(objects) {
                put.reset()
                put.bind(1, table); put.bind(2, blob: pk); put.bind(3, Int64(bitPattern: version))
                if let o = stored.object { put.bind(4, blob: o.encode()) } else { put.bindNull(4) }
                if stored.lists.entries.isEmpty { put.bindNull(5) } else {
                    var w = ByteWriter()
                    stored.lists.encode(into: &w)
                    put.bind(5, blob: w.bytes)
                }
                if stored.object == nil, let e = stored.erasedState { put.bind(6, blob: e.encode()) } else { put.bindNull(6) }
                put.bind(7, Int64(bitPattern: clientFile))
                try put.run()
            }
            let v = try db.statement("UPDATE meta SET value = ? WHERE key = 'server_version'")
            defer { v.reset() }
            v.bind(1, Int64(bitPattern: version))
            try v.run()
            let c = try db.statement("UPDATE client_files SET acked = max(acked, ?), last_seen = ? WHERE ident = ?")
            defer { c.reset() }
            c.bind(1, Int64(bitPattern: clientVersion)); c.bind(2, Int64(Int(WallClock.system.secondsSinceEpoch()))); c.bind(3, Int64(bitPattern: clientFile))
            try c.run()
            headVersion = version
            return version
        }
    }
}
