import FerryCore
import FerryStore

/// The embedded store: one SQLite file (`sync.sqlite` in the data directory), WAL with
/// synchronous=FULL so a committed upload survives a power cut before it is acknowledged.
public final class SQLiteSyncStorage: SyncStorage, @unchecked Sendable {
    private let db: SQLiteConnection
    private let lock = ServerLock()

    public init(path: String) throws {
        db = try SQLiteConnection(creatingAt: path, description: "the server's sync store \(path)")
        self.path = path
        try db.exec("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS objects (tbl TEXT NOT NULL, pk BLOB NOT NULL, version INTEGER NOT NULL,
                doc BLOB, lists BLOB, PRIMARY KEY (tbl, pk)) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS objects_by_version ON objects (tbl, version);
            CREATE TABLE IF NOT EXISTS client_files (ident INTEGER PRIMARY KEY AUTOINCREMENT, salt INTEGER NOT NULL,
                user_id TEXT NOT NULL, acked INTEGER NOT NULL DEFAULT 0, sub_version INTEGER NOT NULL DEFAULT 0,
                subs BLOB, last_seen INTEGER NOT NULL DEFAULT 0);
            INSERT OR IGNORE INTO meta VALUES ('server_version', 0);
            """)
        // Stores made before tombstones kept their last values (see StoredObject.erasedState).
        if try !hasColumn("objects", "erased_doc") { try db.exec("ALTER TABLE objects ADD COLUMN erased_doc BLOB") }
        try db.exec("CREATE INDEX IF NOT EXISTS client_files_by_user ON client_files (user_id, last_seen)")
    }

    private let path: String

    private func hasColumn(_ table: String, _ column: String) throws -> Bool {
        let s = try db.statement("SELECT 1 FROM pragma_table_info(?) WHERE name = ?")
        defer { s.reset() }
        s.bind(1, table); s.bind(2, column)
        return try s.step()
    }

    public func withSnapshot<T>(_ body: (SyncSnapshot) throws -> T) throws -> T {
        let snapshot = try SQLiteSyncSnapshot(path: path)
        defer { snapshot.close() }
        return try body(snapshot)
    }

    public func clientFileCount(userId: String) throws -> Int {
        try lock.withLock {
            let s = try db.statement("SELECT count(*) FROM client_files WHERE user_id = ?")
            defer { s.reset() }
            s.bind(1, userId)
            return try s.step() ? Int(s.int64(0)) : 0
        }
    }

    public func forgetLeastRecentClientFile(userId: String) throws {
        try lock.withLock {
            let s = try db.statement("DELETE FROM client_files WHERE ident = (SELECT ident FROM client_files WHERE user_id = ? ORDER BY last_seen, ident LIMIT 1)")
            defer { s.reset() }
            s.bind(1, userId)
            try s.run()
        }
    }

    public func close() { lock.withLock { db.close() } }

    public func forgetClientFiles() throws {
        try lock.withLock { try db.exec("DELETE FROM client_files") }
    }

    public func forgetClientFile(_ ident: UInt64) throws {
        try lock.withLock {
            let s = try db.statement("DELETE FROM client_files WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) throws {
        try lock.withLock {
            let s = try db.statement("UPDATE client_files SET last_seen = ? WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(secondsSinceEpoch)); s.bind(2, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func serverVersion() throws -> UInt64 {
        try lock.withLock {
            let s = try db.statement("SELECT value FROM meta WHERE key = 'server_version'")
            defer { s.reset() }
            return try s.step() ? UInt64(bitPattern: s.int64(0)) : 0
        }
    }

    public func newClientFile(userId: String) throws -> ClientFileRecord {
        try lock.withLock {
            let salt = UInt64.random(in: 1...UInt64(Int64.max))
            let now = ServerClock.secondsSinceEpoch()
            let s = try db.statement("INSERT INTO client_files (salt, user_id, last_seen) VALUES (?, ?, ?) RETURNING ident")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: salt)); s.bind(2, userId); s.bind(3, Int64(now))
            guard try s.step() else { throw FerryError(.io, "could not allocate a client file") }
            return ClientFileRecord(ident: UInt64(bitPattern: s.int64(0)), salt: salt, userId: userId,
                                    acknowledgedClientVersion: 0, subscriptionVersion: 0, subscriptions: [], lastSeen: now)
        }
    }

    public func clientFile(_ ident: UInt64) throws -> ClientFileRecord? {
        try lock.withLock {
            let s = try db.statement("SELECT salt, user_id, acked, sub_version, subs, last_seen FROM client_files WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: ident))
            guard try s.step() else { return nil }
            let subs = s.isNull(4) ? [] : try Self.decodeSubscriptions(s.blob(4))
            return ClientFileRecord(ident: ident, salt: UInt64(bitPattern: s.int64(0)), userId: s.string(1),
                                    acknowledgedClientVersion: UInt64(bitPattern: s.int64(2)),
                                    subscriptionVersion: UInt64(bitPattern: s.int64(3)), subscriptions: subs, lastSeen: Int(s.int64(5)))
        }
    }

    public func saveSubscriptions(clientFile ident: UInt64, version: UInt64, subscriptions: [Subscription]) throws {
        try lock.withLock {
            let s = try db.statement("UPDATE client_files SET sub_version = ?, subs = ? WHERE ident = ?")
            defer { s.reset() }
            s.bind(1, Int64(bitPattern: version)); s.bind(2, blob: Self.encodeSubscriptions(subscriptions)); s.bind(3, Int64(bitPattern: ident))
            try s.run()
        }
    }

    public func object(_ key: ObjectKey, schema: ObjectSchema) throws -> StoredObject? {
        try lock.withLock {
            let s = try db.statement("SELECT doc, lists, erased_doc FROM objects WHERE tbl = ? AND pk = ?")
            defer { s.reset() }
            s.bind(1, key.table); s.bind(2, blob: ValueCodec.encode(key.key))
            guard try s.step() else { return nil }
            let object = s.isNull(0) ? nil : try StampedObject.decode(s.blob(0), schema: schema)
            var lists = ListOperationLog()
            if !s.isNull(1) {
                var r = ByteReader(s.blob(1))
                lists = try ListOperationLog.decode(from: &r)
            }
            let erased = s.isNull(2) ? nil : try StampedObject.decode(s.blob(2), schema: schema)
            return StoredObject(object: object, lists: lists, erasedState: erased)
        }
    }

    /// Whether `transaction` has one open (then `commit` writes inside it).
    private var inTransaction = false

    public func transaction(_ body: () throws -> Void) throws {
        try lock.withLock {
            try db.exec("BEGIN IMMEDIATE")
            inTransaction = true
        }
        do {
            try body()
            try lock.withLock {
                inTransaction = false
                try db.exec("COMMIT")
            }
        } catch {
            lock.withLock {
                inTransaction = false
                try? db.exec("ROLLBACK")
            }
            throw error
        }
    }

    public func commit(version: UInt64, objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64) throws {
        try lock.withLock {
            let own = !inTransaction
            if own { try db.exec("BEGIN IMMEDIATE") }
            do {
                let put = try db.statement("INSERT OR REPLACE INTO objects (tbl, pk, version, doc, lists, erased_doc) VALUES (?, ?, ?, ?, ?, ?)")
                for (key, stored) in objects {
                    put.reset()
                    put.bind(1, key.table); put.bind(2, blob: ValueCodec.encode(key.key)); put.bind(3, Int64(bitPattern: version))
                    if let o = stored.object { put.bind(4, blob: o.encode()) } else { put.bindNull(4) }
                    if stored.lists.entries.isEmpty { put.bindNull(5) } else {
                        var w = ByteWriter()
                        stored.lists.encode(into: &w)
                        put.bind(5, blob: w.bytes)
                    }
                    if stored.object == nil, let e = stored.erasedState { put.bind(6, blob: e.encode()) } else { put.bindNull(6) }
                    try put.run()
                }
                put.reset()
                let v = try db.statement("UPDATE meta SET value = max(value, ?) WHERE key = 'server_version'")
                v.bind(1, Int64(bitPattern: version))
                try v.run()
                v.reset()
                let c = try db.statement("UPDATE client_files SET acked = max(acked, ?), last_seen = ? WHERE ident = ?")
                c.bind(1, Int64(bitPattern: clientVersion)); c.bind(2, Int64(ServerClock.secondsSinceEpoch())); c.bind(3, Int64(bitPattern: clientFile))
                try c.run()
                c.reset()
                if own { try db.exec("COMMIT") }
            } catch {
                if own { try? db.exec("ROLLBACK") }
                throw error
            }
        }
    }

    public func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws {
        try lock.withLock { try SQLiteObjectReads.changes(db, since: version, schema: schema, body) }
    }

    public func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws {
        try lock.withLock { try SQLiteObjectReads.forEachObject(db, schema: schema, body) }
    }

    static func encodeSubscriptions(_ subs: [Subscription]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(UInt64(subs.count))
        for s in subs { w.string(s.name); w.string(s.objectType); w.string(s.query) }
        return w.bytes
    }

    static func decodeSubscriptions(_ bytes: [UInt8]) throws -> [Subscription] {
        var r = ByteReader(bytes)
        let n = try r.count(minSize: 3)
        var out: [Subscription] = []
        for _ in 0..<n { out.append(Subscription(name: try r.string(), objectType: try r.string(), query: try r.string())) }
        return out
    }
}
