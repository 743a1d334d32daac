import CSQLite
import FerryCore
import FerrySQLite
#if canImport(Glibc)
import Glibc
#endif

/// One open database file (or in-memory database) in this process, shared by all its handles.
/// It owns two SQLite connections: the writer, used only by the handle holding the write lock,
/// and the reader, which sees the last commit (WAL snapshot) and serves every other read.
final class Store: @unchecked Sendable {
    let location: StoreLocation
    let pid = getpid()
    var handleCount = 0

    private(set) var schema: Schema
    /// What the file stores: the schema plus what it keeps without the schema naming it
    /// (dropped optional properties and classes). The history is replayed against this.
    private(set) var storedSchema: Schema
    private(set) var layouts: [TableLayout]
    let writer: SQLiteConnection
    let reader: SQLiteConnection
    let readerLock = ThreadLock()
    /// The sync agent's upload and settle marks for write receipts (`Database+Receipts`).
    let receipts = ReceiptWatermarks()
    /// Held while this process is the file's sync agent (SPEC F-MULTIPROC); guarded by `state`.
    private var agentLock: SyncAgentLock?
    private(set) var isSynced: Bool
    /// Tells this process's observers and sync engine of other processes' commits (synced
    /// files only; nil otherwise).
    private var watcher: ExternalChangeWatcher?
    /// Why a synced file has no watcher (nil when it has one, or is not synced): this process
    /// then hears of other processes' commits only when it commits or syncs itself.
    private(set) var unwatchedReason: String?
    /// This process's own history versions and change-log entries the watcher has not passed
    /// yet (it skips them: they were published when committed); guarded by `state`.
    private var ownHistory: Set<UInt64> = []
    private var ownChangeLog: Set<UInt64> = []
    /// The writer's `PRAGMA data_version` at its last transaction: when it moved, another
    /// process committed, and what the writer cached (the last timestamp) is read again.
    private var writerDataVersion: Int64 = -1
    /// Whether `__ferry_change_log` is known to exist (belongs to the write lock's holder).
    private var changeLogReady = false
    /// The page cipher of an encrypted file (nil when the file is not encrypted).
    let cipher: PageCipher?
    /// The key, kept (in memory it wipes) for the files made from this one that must open
    /// with it: a client reset's snapshot.
    let key: EncryptionKey?

    /// Guards the write lock's owner and the observers. (`lastTimestamp` belongs to whoever
    /// holds the write lock.)
    let state = ThreadLock()
    private var writeOwner: ObjectIdentifier?
    private var writeOwnerThread: UInt = 0
    private var observers: [ObjectIdentifier: ChangeObserver] = [:]
    /// Told after every local commit that wrote history (the sync engine uploads then).
    private var commitListeners: [ObjectIdentifier: @Sendable () -> Void] = [:]

    func setCommitListener(_ owner: ObjectIdentifier, _ listener: (@Sendable () -> Void)?) {
        state.withLock { commitListeners[owner] = listener }
    }

    /// The pre-flight check local commits run (SPEC F-PRECHECK), if the sync session installed
    /// one; guarded by `state`.
    private var _commitCheck: (any CommitCheck)?
    var commitCheck: (any CommitCheck)? { state.withLock { _commitCheck } }
    func setCommitCheck(_ check: (any CommitCheck)?) { state.withLock { _commitCheck = check } }

    func notifyCommitListeners() {
        let current = state.withLock { Array(commitListeners.values) }
        for l in current { l() }
    }
    private var lastTimestamp: Int64 = 0

    init(location: StoreLocation, schema requested: Schema?, synced: Bool, key: EncryptionKey? = nil, standby: Bool = false) throws {
        self.location = location
        // An in-memory store may be synced too (SPEC F-INMEM): it is private to this process,
        // so it needs no sync-agent lock; only files do.
        var name: String
        var memFile: String?
        switch location {
        case .file(let path): name = StoreLocation.uri(path: path)
        case .memory(let id):
            if MemoryFiles.isAvailable {
                let path = MemoryFiles.newPath()
                memFile = path
                name = StoreLocation.uri(path: path)
            } else {
                name = StoreLocation.memdbName(id)
            }
        }
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        var filePath: String?
        if case .file(let path) = location { filePath = path }
        var cipher: PageCipher?
        if let filePath {
            try PageCipher.checkKey(path: filePath, hasKey: key != nil, description: location.displayName)
            if let key {
                let c = try PageCipher(key: key)
                cipher = c
                name = c.uri(filePath)
            }
        } else if key != nil {
            throw FerryError(.invalidArgument, "an in-memory database is not encrypted: give no key")
        }
        self.cipher = cipher
        self.key = key
        let createdFile = filePath.map { access($0, F_OK) != 0 } ?? false
        var lock: SyncAgentLock?
        /// Undoes what opening did: the lock, the cipher, and files this open created.
        func undo() {
            cipher?.destroy()
            lock?.release()
            if let f = memFile { MemoryFiles.remove(f) }
            if createdFile, let p = filePath { for suffix in ["", "-wal", "-shm"] { unlink(p + suffix) } }
        }
        do {
            writer = try cipher?.connection(name, flags: flags, description: location.displayName)
                ?? SQLiteConnection(path: name, flags: flags, description: location.displayName)
        } catch {
            undo()
            throw error
        }
        let journal: String? = filePath != nil ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
            // Memory does not survive a crash anyway: no fsync.
            : memFile != nil ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;" : nil
        do {
            (schema, storedSchema, isSynced) = try Store.prepare(writer, location: location, requested: requested,
                                                                 synced: synced, standby: standby, journal: journal, lock: &lock)
        } catch {
            writer.close()
            undo()
            throw error
        }
        layouts = schema.classes.enumerated().map { TableLayout($0.element, classIndex: $0.offset) }
        do {
            let r = try cipher?.connection(name, flags: flags, description: location.displayName)
                ?? SQLiteConnection(path: name, flags: flags, description: location.displayName)
            // SQLite opens a connection's WAL at its first read: read now, so a process out
            // of file descriptors fails this open, not a later read of an open database.
            do { try r.exec("SELECT count(*) FROM sqlite_master") } catch {
                r.close()
                throw error
            }
            reader = r
        } catch {
            writer.close()
            undo()
            throw error
        }
        if journal != nil {
            do {
                let c = try Checkpointer(name: name, description: location.displayName)
                c.attach(to: writer)
                checkpointer = c
            } catch {
                // Without the thread, SQLite's own checkpoints on commit still run.
            }
        }
        agentLock = lock
        memoryFile = memFile
        if isSynced, filePath != nil {
            // Without the watcher the file still works; what it costs is said where the sync
            // engine can log it (`unwatchedReason`, issue 22 point 10).
            do {
                let c = try cipher?.connection(name, flags: SQLITE_OPEN_READWRITE, description: location.displayName)
                    ?? SQLiteConnection(path: name, flags: SQLITE_OPEN_READWRITE, description: location.displayName)
                watcher = try ExternalChangeWatcher(store: self, connection: c)
            } catch {
                unwatchedReason = "\(error)"
            }
        }
    }

    // MARK: several processes (SPEC F-MULTIPROC)

    /// Whether this process is the file's sync agent (always, for an in-memory store).
    var isSyncAgent: Bool {
        if case .memory = location { return true }
        return state.withLock { agentLock != nil }
    }

    /// Takes the sync agent role if no other process has it. True when this process has it.
    func tryBecomeSyncAgent() throws -> Bool {
        guard case .file(let path) = location else { return true }
        return try state.withLock {
            if agentLock != nil { return true }
            agentLock = try SyncAgentLock.tryAcquire(databasePath: path)
            return agentLock != nil
        }
    }

    /// Records a history version or change-log entry this process committed (the watcher
    /// skips it).
    func noteOwnCommit(history: UInt64? = nil, changeLog: UInt64? = nil) {
        guard watcher != nil else { return }
        state.withLock {
            if let history { ownHistory.insert(history) }
            if let changeLog { ownChangeLog.insert(changeLog) }
        }
    }

    /// After a rollback: what it numbered was never committed.
    func forgetOwnCommits() {
        guard watcher != nil else { return }
        // The rollback may have undone the change log's creation too.
        changeLogReady = false
        state.withLock {
            ownHistory.removeAll()
            ownChangeLog.removeAll()
        }
    }

    /// Whether the watcher should skip this entry (and forgets it).
    func takeOwn(history: UInt64) -> Bool { state.withLock { ownHistory.remove(history) != nil } }
    func takeOwn(changeLog: UInt64) -> Bool { state.withLock { ownChangeLog.remove(changeLog) != nil } }

    /// Hands changes another process committed to this process's observers.
    func publishExternal(_ changes: CommittedChanges) {
        guard !changes.isEmpty else { return }
        let current = state.withLock { Array(observers.values) }
        for o in current { o.enqueue(changes) }
    }

    /// Whether commits of the sync engine are logged for other processes' observers.
    var logsChanges: Bool { watcher != nil }

    /// Inside a write transaction of the sync engine: logs what it changed for the other
    /// processes that have the file open (their observers learn of downloads this way; local
    /// writes they read from the history). Keeps the last `ExternalChangeWatcher.logWindow`.
    func logChanges(_ changes: CommittedChanges) throws {
        guard watcher != nil, !changes.isEmpty else { return }
        if !changeLogReady {
            try writer.exec("CREATE TABLE IF NOT EXISTS __ferry_change_log (seq INTEGER PRIMARY KEY, changes BLOB NOT NULL)")
            changeLogReady = true
        }
        let s = try writer.statement("INSERT INTO __ferry_change_log (changes) VALUES (?)")
        s.bind(1, blob: ChangeLogCodec.encode(changes))
        try s.run()
        s.resetKeepingBindings()
        let seq = UInt64(bitPattern: writer.lastInsertRowID)
        noteOwnCommit(changeLog: seq)
        if seq > ExternalChangeWatcher.logWindow {
            let trim = try writer.statement("DELETE FROM __ferry_change_log WHERE seq <= ?")
            trim.bind(1, Int64(seq - ExternalChangeWatcher.logWindow))
            try trim.run()
            trim.resetKeepingBindings()
        }
    }

    /// Checkpoints the WAL on a thread of its own (nil for memdb stores).
    private var checkpointer: Checkpointer?

    /// Brings a freshly opened file to the requested schema. Everything that can fail without
    /// writing is checked first (a foreign file, a missing schema for a new database, another
    /// sync agent), and the write lock is only taken when something must be written, so
    /// opening a file that another process is writing does not wait for it.
    private static func prepare(_ w: SQLiteConnection, location: StoreLocation, requested: Schema?, synced: Bool,
                                standby: Bool, journal: String?, lock: inout SyncAgentLock?) throws -> (Schema, Schema, Bool) {
        let existing = try readStoredSchema(w)
        if requested == nil && existing == nil {
            throw FerryError(.invalidSchema, "\(location.displayName) is a new database: a schema is needed to create it")
        }
        if case .file(let path) = location {
            // One process at a time is a synced file's sync agent (SPEC F-MULTIPROC). Only an
            // open that asks to sync takes the role; another process may open the file to read
            // and write it, and its commits are uploaded by the agent. A sync session may open
            // in standby and take the role when the agent goes (`tryBecomeSyncAgent`).
            if synced {
                lock = standby ? try SyncAgentLock.tryAcquire(databasePath: path) : try SyncAgentLock(databasePath: path)
            }
        }
        if let journal { try w.exec(journal) }

        func plan() throws -> (stored: Schema?, marked: Bool, migration: SchemaMigration?) {
            let stored = try readStoredSchema(w)
            return (stored, try readSyncedMark(w), try requested.map { try SchemaMigration(stored: stored, requested: $0) })
        }
        func needsWrite(_ p: (stored: Schema?, marked: Bool, migration: SchemaMigration?)) -> Bool {
            if p.stored == nil || (synced && !p.marked) { return true }
            guard let m = p.migration else { return false }
            return !m.statements.isEmpty || m.storedSchema != p.stored
        }
        try w.exec("BEGIN")
        do {
            var p = try plan()
            if needsWrite(p) {
                try w.exec("COMMIT")
                try w.exec("BEGIN IMMEDIATE")
                try w.exec("""
                    CREATE TABLE IF NOT EXISTS __ferry_meta (key TEXT PRIMARY KEY NOT NULL, value BLOB);
                    CREATE TABLE IF NOT EXISTS __ferry_history (version INTEGER PRIMARY KEY, changeset BLOB NOT NULL);
                    CREATE TABLE IF NOT EXISTS __ferry_sync_bases (history_version INTEGER PRIMARY KEY, server_version INTEGER NOT NULL);
                    """)
                p = try plan()
                if let m = p.migration {
                    for sql in m.statements { try w.exec(sql) }
                    if p.stored != m.storedSchema { try writeMeta(w, "schema", SchemaCodec.encode(m.storedSchema)) }
                }
                if synced && !p.marked { try writeMeta(w, "synced", [1]) }
            }
            try w.exec("COMMIT")
            guard let active = requested ?? p.stored, let kept = p.migration?.storedSchema ?? p.stored else {
                throw FerryError(.invalidSchema, "\(location.displayName) is a new database: a schema is needed to create it")
            }
            return (active, kept, synced || p.marked)
        } catch {
            w.rollback()
            throw error
        }
    }

    /// The /dev/shm file behind an in-memory store, removed when the store closes.
    private var memoryFile: String?

    func close() {
        watcher?.stop()
        watcher = nil
        writer.setWALHook(nil, nil)
        checkpointer?.stop()
        checkpointer = nil
        writer.close()
        readerLock.withLock { reader.close() }
        state.withLock {
            agentLock?.release()
            agentLock = nil
        }
        cipher?.destroy()
        if let f = memoryFile {
            MemoryFiles.remove(f)
            memoryFile = nil
        }
    }

    /// A second handle in this process must agree with the store's schema.
    func checkCompatible(schema requested: Schema?, synced: Bool, key: EncryptionKey? = nil) throws {
        switch (cipher, key) {
        case (nil, nil): break
        case (let c?, let k?):
            guard c.matches(k) else { throw FerryError(.decrypt, "\(location.displayName) is already open in this process with another key") }
        case (_?, nil): throw FerryError(.decrypt, "\(location.displayName) is encrypted: open it with its key")
        case (nil, _?): throw FerryError(.decrypt, "\(location.displayName) is not encrypted: convert it with ferry_db_change_key before opening it with a key")
        }
        if let requested, requested != schema {
            throw FerryError(.schemaMismatch, "\(location.displayName) is already open in this process with a different schema; close its other handles before opening it with a new one")
        }
        if synced && !isSynced {
            throw FerryError(.invalidArgument, "\(location.displayName) is already open in this process as an unsynced database; close it before marking it synced")
        }
    }

    // MARK: meta

    private static func readMeta(_ c: SQLiteConnection, _ key: String) throws -> [UInt8]? {
        let exists = try c.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__ferry_meta'")
        defer { exists.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        guard try exists.step() else { return nil }
        let s = try c.statement("SELECT value FROM __ferry_meta WHERE key = ?")
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        s.bind(1, key)
        guard try s.step() else { return nil }
        return s.blob(0)
    }

    private static func writeMeta(_ c: SQLiteConnection, _ key: String, _ value: [UInt8]) throws {
        let s = try c.statement("INSERT OR REPLACE INTO __ferry_meta (key, value) VALUES (?, ?)")
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        s.bind(1, key)
        s.bind(2, blob: value)
        try s.run()
    }

    private static func readSyncedMark(_ c: SQLiteConnection) throws -> Bool {
        try readMeta(c, "synced") == [1]
    }

    private static func readStoredSchema(_ c: SQLiteConnection) throws -> Schema? {
        guard let bytes = try readMeta(c, "schema") else {
            // A file with tables but no Ferry schema is not ours.
            let s = try c.statement("SELECT COUNT(*) FROM sqlite_master WHERE name NOT LIKE '\\_\\_ferry\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
            defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
            _ = try s.step()
            if s.int64(0) > 0 { throw FerryError(.corrupt, "the file is an SQLite database but not a Ferry database") }
            return nil
        }
        return try SchemaCodec.decode(bytes)
    }

    // MARK: the write lock

    /// Takes the write lock for a handle, waiting for another handle to finish.
    func acquireWriteLock(for owner: ObjectIdentifier) throws {
        try state.withLock {
            if writeOwner == owner { throw FerryError(.alreadyInTransaction, "this handle already has a write transaction") }
            if writeOwner != nil && writeOwnerThread == currentThreadID() {
                throw FerryError(.alreadyInTransaction, "another handle on this thread has a write transaction on \(location.displayName); waiting for it would deadlock")
            }
            while writeOwner != nil { state.wait() }
            writeOwner = owner
            writeOwnerThread = currentThreadID()
        }
        do {
            try writer.exec("BEGIN IMMEDIATE")
            if watcher != nil {
                // Another process committed since this writer's last transaction: the last
                // timestamp it cached may be behind the file's (a changeset must never be
                // stamped before an earlier one of the same file).
                let v = try writer.dataVersion()
                if v != writerDataVersion {
                    writerDataVersion = v
                    lastTimestamp = 0
                }
            }
        } catch {
            releaseWriteLock(for: owner)
            throw error
        }
    }

    func releaseWriteLock(for owner: ObjectIdentifier) {
        state.withLock {
            if writeOwner == owner {
                writeOwner = nil
                writeOwnerThread = 0
                state.broadcast()
            }
        }
    }


    /// The clock changesets are stamped with (`DatabaseConfiguration.clock`).
    private var clock = WallClock.system

    func useClock(_ c: WallClock) { state.withLock { clock = c } }

    /// A timestamp for a new changeset: the clock, but never at or before the previous one.
    func nextTimestamp() throws -> Int64 {
        if lastTimestamp == 0 {
            let s = try writer.statement("SELECT changeset FROM __ferry_history ORDER BY version DESC LIMIT 1")
            defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
            // Undecodable, the history is damaged: a timestamp from 0 would order this write
            // before every earlier one, so the write fails instead.
            if try s.step() { lastTimestamp = try ChangesetCodec.decode(s.blob(0)).timestamp }
        }
        let now = state.withLock { clock }.nanosecondsSinceEpoch()
        lastTimestamp = max(now, lastTimestamp + 1)
        return lastTimestamp
    }

    // MARK: observers

    /// Whether any observer is registered: without one, a commit skips summarising its changes.
    var hasObservers: Bool { state.withLock { !observers.isEmpty } }

    func addObserver(_ o: ChangeObserver) { state.withLock { observers[ObjectIdentifier(o)] = o } }
    func removeObserver(_ o: ChangeObserver) { _ = state.withLock { observers.removeValue(forKey: ObjectIdentifier(o)) } }

    /// Commits the writer's transaction and hands what changed to every observer, as one step
    /// for readers: no read through the reader lock sees the data without the changes queued.
    func commitAndPublish(_ changes: CommittedChanges?) throws {
        try readerLock.withLock {
            try writer.exec("COMMIT")
            guard let changes else { return }
            let current = state.withLock { Array(observers.values) }
            for o in current { o.enqueue(changes) }
        }
    }

    /// Runs a read on the reader connection (the last committed state). The lock is recursive
    /// only in the sense that callers never nest it.
    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try readerLock.withLock {
            guard reader.db != nil else { throw FerryError(.closed, "the database is closed") }
            return try body(reader)
        }
    }
}
