import FerryCore
import FerrySQLite
import FerrySyncStorage

/// The embedded store's operations data (`OperationsStorage`): the sync log and this node's
/// published connections, in a SQLite file of their own (`operations.sqlite`). A file apart
/// from `sync.sqlite`, so writing the log never takes the sync writer's turn nor its file lock.
/// Calls run on the blocking-read threads, off Swift's cooperative pool.
public final class SQLiteOperationsStorage: OperationsStorage, TriggerStorage, @unchecked Sendable {
    private let db: SQLiteConnection
    private let lock = ThreadLock()
    private var closed = false
    private let path: String

    public init(path: String) throws {
        self.path = path
        db = try SQLiteConnection(creatingAt: path, description: "the server's operations store \(path)")
        // synchronous=NORMAL: a sync log entry lost in a power cut costs nothing that matters.
        try db.exec("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            CREATE TABLE IF NOT EXISTS sync_log (id INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, kind TEXT NOT NULL,
                user_id TEXT NOT NULL, node TEXT NOT NULL, connection_id INTEGER NOT NULL, message TEXT NOT NULL, details TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS sync_log_by_user ON sync_log (user_id, id);
            CREATE INDEX IF NOT EXISTS sync_log_by_kind ON sync_log (kind, id);
            CREATE INDEX IF NOT EXISTS sync_log_by_time ON sync_log (time);
            CREATE TABLE IF NOT EXISTS live_connections (node TEXT NOT NULL, connection_id INTEGER NOT NULL, user_id TEXT NOT NULL,
                client_file INTEGER, sdk TEXT, connected_since INTEGER NOT NULL, bytes_up INTEGER NOT NULL, bytes_down INTEGER NOT NULL,
                sessions INTEGER NOT NULL, published INTEGER NOT NULL, PRIMARY KEY (node, connection_id));
            CREATE TABLE IF NOT EXISTS triggers (name TEXT PRIMARY KEY NOT NULL, cursor INTEGER NOT NULL, failures INTEGER NOT NULL DEFAULT 0,
                paused INTEGER NOT NULL DEFAULT 0, last_error TEXT, holder TEXT, lease_until INTEGER NOT NULL DEFAULT 0,
                delivered INTEGER NOT NULL DEFAULT 0);
            """)
    }

    /// Runs `body` with the connection on a blocking-read thread.
    private func run<T>(_ body: @escaping (SQLiteConnection) throws -> T) async throws -> T {
        try await BlockingReads.run {
            try lock.withLock {
                guard !closed else { throw FerryError(.closed, "the operations store \(path) is closed") }
                return try body(db)
            }
        }
    }

    private func transaction<T>(_ body: @escaping (SQLiteConnection) throws -> T) async throws -> T {
        try await run { db in
            try db.exec("BEGIN IMMEDIATE")
            do {
                let result = try body(db)
                try db.exec("COMMIT")
                return result
            } catch {
                db.rollback()
                throw error
            }
        }
    }

    /// Rows the last statement changed.
    private static func changes(_ db: SQLiteConnection) throws -> Int {
        let s = try db.statement("SELECT changes()")
        defer { s.reset() }
        return try s.step() ? Int(s.int64(0)) : 0
    }

    public func appendSyncLog(_ entries: [SyncLogEntry]) async throws {
        guard !entries.isEmpty else { return }
        try await transaction { db in
            let s = try db.statement("INSERT INTO sync_log (time, kind, user_id, node, connection_id, message, details) VALUES (?, ?, ?, ?, ?, ?, ?)")
            defer { s.reset() }
            for e in entries {
                s.reset()
                s.bind(1, e.timeMilliseconds); s.bind(2, e.kind.rawValue); s.bind(3, e.userId); s.bind(4, e.node)
                s.bind(5, Int64(bitPattern: e.connectionId)); s.bind(6, e.message); s.bind(7, e.details)
                try s.run()
            }
        }
    }

    public func syncLog(_ query: SyncLogQuery) async throws -> [SyncLogEntry] {
        var conditions: [String] = []
        if query.userId != nil { conditions.append("user_id = ?1") }
        if !query.kinds.isEmpty { conditions.append("kind IN (\(query.kinds.map { "'\($0.rawValue)'" }.joined(separator: ",")))") }
        if query.sinceMilliseconds != nil { conditions.append("time >= ?2") }
        if query.untilMilliseconds != nil { conditions.append("time < ?3") }
        if query.beforeId != nil { conditions.append("id < ?4") }
        let sql = "SELECT id, time, kind, user_id, node, connection_id, message, details FROM sync_log"
            + (conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")) + " ORDER BY id DESC LIMIT ?5"
        return try await run { db in
            let s = try db.statement(sql)
            defer { s.reset() }
            if let u = query.userId { s.bind(1, u) }
            if let t = query.sinceMilliseconds { s.bind(2, t) }
            if let t = query.untilMilliseconds { s.bind(3, t) }
            if let b = query.beforeId { s.bind(4, b) }
            s.bind(5, Int64(max(0, query.limit)))
            var out: [SyncLogEntry] = []
            while try s.step() {
                // A kind this version does not know (written by a newer node) is skipped.
                guard let kind = SyncLogKind(rawValue: s.string(2)) else { continue }
                out.append(SyncLogEntry(id: s.int64(0), timeMilliseconds: s.int64(1), kind: kind, userId: s.string(3), node: s.string(4),
                                        connectionId: UInt64(bitPattern: s.int64(5)), message: s.string(6), details: s.string(7)))
            }
            return out
        }
    }

    public func trimSyncLog(_ retention: SyncLogRetention, users: [String]?, nowMilliseconds: Int64) async throws -> Int {
        try await transaction { db in
            var removed = 0
            let old = try db.statement("DELETE FROM sync_log WHERE time < ?")
            defer { old.reset() }
            old.bind(1, nowMilliseconds - retention.maxAgeMilliseconds)
            try old.run()
            removed += try Self.changes(db)
            var targets = users ?? []
            if users == nil {
                let all = try db.statement("SELECT DISTINCT user_id FROM sync_log")
                defer { all.reset() }
                while try all.step() { targets.append(all.string(0)) }
            }
            let excess = try db.statement("""
                DELETE FROM sync_log WHERE user_id = ?1 AND id <= (SELECT id FROM sync_log WHERE user_id = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
                """)
            defer { excess.reset() }
            for user in Set(targets) {
                excess.reset()
                excess.bind(1, user); excess.bind(2, Int64(max(0, retention.maxEntriesPerUser)))
                try excess.run()
                removed += try Self.changes(db)
            }
            return removed
        }
    }

    public func publishConnections(node: String, _ connections: [LiveConnectionRecord], nowMilliseconds: Int64) async throws {
        try await transaction { db in
            let clear = try db.statement("DELETE FROM live_connections WHERE node = ?")
            defer { clear.reset() }
            clear.bind(1, node)
            try clear.run()
            let put = try db.statement("""
                INSERT OR REPLACE INTO live_connections (node, connection_id, user_id, client_file, sdk, connected_since, bytes_up, bytes_down,
                    sessions, published) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            defer { put.reset() }
            for c in connections {
                put.reset()
                put.bind(1, node); put.bind(2, Int64(bitPattern: c.connectionId)); put.bind(3, c.userId)
                if let f = c.clientFile { put.bind(4, Int64(bitPattern: f)) } else { put.bindNull(4) }
                if let sdk = c.sdk { put.bind(5, sdk) } else { put.bindNull(5) }
                put.bind(6, c.connectedSinceMilliseconds); put.bind(7, c.bytesUp); put.bind(8, c.bytesDown)
                put.bind(9, Int64(c.sessions)); put.bind(10, nowMilliseconds)
                try put.run()
            }
        }
    }

    public func liveConnections(freshSinceMilliseconds: Int64) async throws -> [LiveConnectionRecord] {
        try await transaction { db in
            let stale = try db.statement("DELETE FROM live_connections WHERE published < ?")
            defer { stale.reset() }
            stale.bind(1, freshSinceMilliseconds)
            try stale.run()
            let s = try db.statement("""
                SELECT node, connection_id, user_id, client_file, sdk, connected_since, bytes_up, bytes_down, sessions
                FROM live_connections ORDER BY node, connection_id
                """)
            defer { s.reset() }
            var out: [LiveConnectionRecord] = []
            while try s.step() {
                out.append(LiveConnectionRecord(node: s.string(0), connectionId: UInt64(bitPattern: s.int64(1)), userId: s.string(2),
                                                clientFile: s.isNull(3) ? nil : UInt64(bitPattern: s.int64(3)), sdk: s.isNull(4) ? nil : s.string(4),
                                                connectedSinceMilliseconds: s.int64(5), bytesUp: s.int64(6), bytesDown: s.int64(7),
                                                sessions: Int(s.int64(8))))
            }
            return out
        }
    }

    // MARK: triggers

    private static let triggerColumns = "name, cursor, failures, paused, last_error, holder, lease_until, delivered"

    private static func triggerState(_ s: Statement) -> TriggerState {
        TriggerState(name: s.string(0), cursor: UInt64(bitPattern: s.int64(1)), failures: Int(s.int64(2)), paused: s.int64(3) != 0,
                     lastError: s.isNull(4) ? nil : s.string(4), holder: s.isNull(5) ? nil : s.string(5), leaseUntilMilliseconds: s.int64(6),
                     delivered: s.int64(7))
    }

    public func triggerStates() async throws -> [TriggerState] {
        try await run { db in
            let s = try db.statement("SELECT \(Self.triggerColumns) FROM triggers ORDER BY name")
            defer { s.reset() }
            var out: [TriggerState] = []
            while try s.step() { out.append(Self.triggerState(s)) }
            return out
        }
    }

    public func leaseTrigger(_ name: String, node: String, nowMilliseconds: Int64, untilMilliseconds: Int64, cursor: UInt64) async throws -> TriggerState? {
        try await transaction { db in
            let create = try db.statement("INSERT OR IGNORE INTO triggers (name, cursor) VALUES (?, ?)")
            defer { create.reset() }
            create.bind(1, name); create.bind(2, Int64(bitPattern: cursor))
            try create.run()
            let take = try db.statement("""
                UPDATE triggers SET holder = ?2, lease_until = ?3 WHERE name = ?1 AND (holder IS NULL OR holder = ?2 OR lease_until < ?4)
                """)
            defer { take.reset() }
            take.bind(1, name); take.bind(2, node); take.bind(3, untilMilliseconds); take.bind(4, nowMilliseconds)
            try take.run()
            guard try Self.changes(db) == 1 else { return nil }
            let read = try db.statement("SELECT \(Self.triggerColumns) FROM triggers WHERE name = ?")
            defer { read.reset() }
            read.bind(1, name)
            return try read.step() ? Self.triggerState(read) : nil
        }
    }

    public func recordTrigger(_ name: String, node: String, _ p: TriggerProgress) async throws -> Bool {
        try await transaction { db in
            let s = try db.statement("""
                UPDATE triggers SET cursor = ?3, failures = ?4, paused = ?5, last_error = ?6, delivered = delivered + ?7
                WHERE name = ?1 AND holder = ?2
                """)
            defer { s.reset() }
            s.bind(1, name); s.bind(2, node); s.bind(3, Int64(bitPattern: p.cursor)); s.bind(4, Int64(p.failures)); s.bind(5, Int64(p.paused ? 1 : 0))
            if let e = p.lastError { s.bind(6, e) } else { s.bindNull(6) }
            s.bind(7, p.delivered)
            try s.run()
            return try Self.changes(db) == 1
        }
    }

    public func resumeTrigger(_ name: String) async throws -> Bool {
        try await transaction { db in
            let s = try db.statement("UPDATE triggers SET paused = 0, failures = 0 WHERE name = ?")
            defer { s.reset() }
            s.bind(1, name)
            try s.run()
            return try Self.changes(db) == 1
        }
    }

    public func closeOperations() async {
        lock.withLock {
            guard !closed else { return }
            closed = true
            db.close()
        }
    }
}
