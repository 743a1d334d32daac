import FerryCore
import FerrySQLite

/// How to open a database.
public struct DatabaseConfiguration: Sendable {
    public enum Location: Sendable { case file(String), memory(String) }
    public var location: Location
    /// The schema to open with; nil opens with the schema stored in the file.
    public var schema: Schema?
    /// Mark the file synced and make this process its sync agent (SPEC F-MULTIPROC); other
    /// processes may still open it without this to read and write it.
    public var synced: Bool
    /// With `synced`: when another process is the file's sync agent, open anyway as a
    /// process that reads and writes it, and take the role later (`becomeSyncAgent`); the
    /// sync engine opens so (SPEC F-MULTIPROC). Without it, that open fails with
    /// `multipleSyncAgents`.
    public var allowStandby = false
    /// A handle that reads only: `beginWrite` fails (e.g. the snapshot a client reset's
    /// callbacks get of the database as it was).
    public var readOnly: Bool
    /// The key of an encrypted file (docs/encryption.md): a new file is created encrypted, an
    /// existing one must have been encrypted with this key. Nil for an unencrypted file.
    public var encryptionKey: EncryptionKey?
    /// The clock changesets are stamped with (nil: the system's). A simulation passes its own,
    /// so a run replays exactly; the first open of a file sets it for every handle.
    package var clock: WallClock?

    public init(location: Location, schema: Schema?, synced: Bool = false, readOnly: Bool = false, encryptionKey: EncryptionKey? = nil) {
        self.location = location
        self.schema = schema
        self.synced = synced
        self.readOnly = readOnly
        self.encryptionKey = encryptionKey
    }
}

/// One handle on a database. Calls on a handle are serialised; handles on one file in one
/// process share a store, so a commit through one is visible through all. A write transaction
/// belongs to the handle; reads through the handle see its uncommitted writes, reads through
/// other handles see the last commit.
public final class Database: @unchecked Sendable {
    public let schema: Schema
    public let scheduler: NotificationScheduler
    private let store: Store
    private let lock = ThreadLock()
    private var closed = false
    /// The write transaction's instructions so far; nil when there is none.
    private var transaction: TransactionLog?
    private var observers: [ChangeObserver] = []
    /// `lastResetPeakInstructions` (guarded by `lock`).
    private var resetPeak = 0

    public static func open(_ configuration: DatabaseConfiguration, scheduler: NotificationScheduler) throws -> Database {
        let location: StoreLocation
        switch configuration.location {
        case .file(let path): location = try StoreLocation.canonicalFile(path)
        case .memory(let id):
            guard !id.isEmpty, id.utf8.count <= 200, !id.utf8.contains(0) else {
                throw FerryError(.invalidArgument, "an in-memory identifier must be 1 to 200 bytes without NUL")
            }
            location = .memory(identifier: id)
        }
        let store = try StoreRegistry.shared.acquire(location, schema: configuration.schema, synced: configuration.synced,
                                                     key: configuration.encryptionKey, standby: configuration.allowStandby)
        if let clock = configuration.clock { store.useClock(clock) }
        return Database(store: store, scheduler: scheduler, readOnly: configuration.readOnly)
    }

    /// Whether any handle of this process has the file at `path` open.
    public static func isOpenInThisProcess(path: String) -> Bool {
        guard let location = try? StoreLocation.canonicalFile(path) else { return false }
        return StoreRegistry.shared.isOpen(location)
    }

    /// The store's table layouts, held here so the write path does not go through the store.
    private let layouts: [TableLayout]

    public let readOnly: Bool

    private init(store: Store, scheduler: NotificationScheduler, readOnly: Bool) {
        self.store = store
        self.readOnly = readOnly
        self.schema = store.schema
        self.layouts = store.layouts
        self.scheduler = scheduler
    }

    deinit { close() }

    private var id: ObjectIdentifier { ObjectIdentifier(self) }

    public var isClosed: Bool { lock.withLock { closed } }
    public var isInTransaction: Bool { lock.withLock { transaction != nil } }
    public var isSynced: Bool { store.isSynced }

    /// Whether this process is the file's sync agent (SPEC F-MULTIPROC): the one process that
    /// syncs it. Other processes may read and write the file; the agent uploads their commits.
    public var isSyncAgent: Bool { store.isSyncAgent }

    /// Why this synced file is not watched for other processes' commits (nil when it is, or
    /// is not synced): then this process hears of them only when it commits or syncs itself.
    public var otherProcessesUnwatchedReason: String? { store.unwatchedReason }

    /// Takes the sync agent role if no other process has it (the agent closed the file or
    /// died). True when this process has the role.
    public func becomeSyncAgent() throws -> Bool { try store.tryBecomeSyncAgent() }
    /// The key the file is encrypted with (nil when it is not), for opening copies of it.
    public var encryptionKey: EncryptionKey? { store.key }
    public var isInMemory: Bool { if case .memory = store.location { return true } else { return false } }
    /// How many handles of this process share this handle's file (this one included).
    public var handleCount: Int { StoreRegistry.shared.handleCount(store) }

    /// Runs `body` with the handle locked, after checking it is open.
    private func locked<T>(_ body: () throws -> T) throws -> T {
        try lock.withLock {
            guard !closed else { throw FerryError(.closed, "the database handle is closed") }
            return try body()
        }
    }

    /// Ends the handle: cancels its transaction, stops its observers, releases the store.
    public func close() {
        let (wasOpen, toCancel): (Bool, [ChangeObserver]) = lock.withLock {
            guard !closed else { return (false, []) }
            closed = true
            if transaction != nil {
                store.writer.rollback()
                transaction = nil
                store.releaseWriteLock(for: id)
            }
            let o = observers
            observers.removeAll()
            return (true, o)
        }
        guard wasOpen else { return }
        for o in toCancel { o.cancel() }
        StoreRegistry.shared.release(store)
    }

    // MARK: transactions

    public func beginWrite() throws {
        try locked {
            guard transaction == nil else { throw FerryError(.alreadyInTransaction, "this handle already has a write transaction") }
            guard !readOnly else { throw FerryError(.invalidArgument, "this handle is read-only") }
            try store.acquireWriteLock(for: id)
            transaction = TransactionLog(classCount: schema.classes.count)
        }
    }

    /// Commits the write transaction and returns its write receipt: the history version of
    /// its changeset, which `receiptStatus` follows to the server (0 when the transaction
    /// changed nothing and so has nothing to sync). The receipt costs the commit nothing: it is
    /// the rowid SQLite just assigned.
    ///
    /// On a synced file with a pre-flight check (SPEC F-PRECHECK) the check runs first: in
    /// strict mode a transaction it rejects is rolled back and the commit fails with
    /// `writeRejected` (the transaction is over, nothing is written); in warn mode the commit
    /// goes ahead. Either way the check's report reaches the host before this returns.
    @discardableResult
    public func commit() throws -> UInt64 {
        var finding: (check: any CommitCheck, rejected: [CompensatingWrite])?
        let receipt: UInt64
        do {
            receipt = try commitLocked(&finding)
        } catch {
            if let f = finding { f.check.report(f.rejected, committed: false) }
            throw error
        }
        if let f = finding { f.check.report(f.rejected, committed: true) }
        return receipt
    }

    private func commitLocked(_ finding: inout (check: any CommitCheck, rejected: [CompensatingWrite])?) throws -> UInt64 {
        try locked {
            guard let log = transaction else { throw FerryError(.notInTransaction, "there is no write transaction to commit") }
            transaction = nil
            defer { store.releaseWriteLock(for: id) }
            do {
                var encoded: [UInt8] = []
                var receipt: UInt64 = 0
                if !log.isEmpty {
                    encoded = log.encode(timestamp: try store.nextTimestamp())
                    if let check = store.commitCheck {
                        let rejected = check.check(try objectWrites(try ChangesetCodec.decode(encoded).instructions, store: store))
                        if !rejected.isEmpty {
                            finding = (check, rejected)
                            if check.rejectsCommit { throw PrecheckRejection(rejected) }
                        }
                    }
                    let s = try store.writer.statement("INSERT INTO __ferry_history (changeset) VALUES (?)")
                    defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
                    s.bind(1, blob: encoded)
                    try s.run()
                    receipt = UInt64(bitPattern: store.writer.lastInsertRowID)
                    // Before COMMIT makes it visible: other processes' watchers read it from
                    // the history, this process's must skip it.
                    store.noteOwnCommit(history: receipt)
                }
                let changes = log.isEmpty || !store.hasObservers
                    ? nil : CommittedChanges(try ChangesetCodec.decode(encoded).instructions)
                // Observers must never see a commit's data without its changes (nor the
                // reverse): they read under the reader lock, so commit and publish under it.
                try store.commitAndPublish(changes)
                if !log.isEmpty { store.notifyCommitListeners() }
                return receipt
            } catch let r as PrecheckRejection {
                store.writer.rollback()
                throw r.error
            } catch let e as FerryError {
                store.writer.rollback()
                // A version rolled back may be another process's next one.
                store.forgetOwnCommits()
                throw FerryError(e.code == .duplicatePrimaryKey ? .io : e.code, "the commit failed and was rolled back: \(e.message)")
            }
        }
    }

    public func cancel() throws {
        try locked {
            guard transaction != nil else { throw FerryError(.notInTransaction, "there is no write transaction to cancel") }
            transaction = nil
            defer { store.releaseWriteLock(for: id) }
            try store.writer.exec("ROLLBACK")
        }
    }

    // MARK: writes

    private func objectSchema(_ classIndex: Int) throws -> ObjectSchema { try layout(classIndex).objectSchema }

    private func property(_ os: ObjectSchema, _ index: Int) throws -> Property {
        guard index >= 0 && index < os.properties.count else {
            throw FerryError(.noSuchProperty, "class '\(os.name)' has no property with key \(index) (it has \(os.properties.count))")
        }
        return os.properties[index]
    }

    private func checkKey(_ os: ObjectSchema, _ key: FerryValue) throws {
        guard key.type == os.primaryKey.type else {
            throw FerryError(.wrongType, "the primary key of class '\(os.name)' is \(os.primaryKey.type), got \(key.type.map { "\($0)" } ?? "null")")
        }
    }

    /// Applies and records one instruction inside the write transaction.
    private func write(_ instruction: Instruction) throws {
        guard transaction != nil else { throw FerryError(.notInTransaction, "writes need a write transaction (begin one first)") }
        try store.apply(instruction, on: store.writer)
        transaction?.append(instruction)
    }

    /// Checks the values given for a new object and lays them out as a row (defaults where
    /// nothing was given) plus the fields the create instruction records.
    private func validatedFields(_ layout: TableLayout, _ values: [(Int, FerryValue)]) throws -> (FerryValue, [FieldValue], [FerryValue]) {
        let os = layout.objectSchema
        var row = layout.defaults
        var given = [Bool](repeating: false, count: row.count)
        var fields: [FieldValue] = []
        fields.reserveCapacity(values.count)
        for (index, value) in values {
            let p = try property(os, index)
            guard !given[index] else { throw FerryError(.invalidArgument, "property '\(os.name).\(p.name)' is given twice") }
            given[index] = true
            guard !p.isList else { throw FerryError(.invalidArgument, "list property '\(os.name).\(p.name)' cannot be given when creating; fill it with list inserts") }
            try p.validateElement(value, className: os.name)
            row[index] = value
            if !p.isPrimaryKey { fields.append(FieldValue(name: p.name, value: value)) }
        }
        guard given[os.primaryKeyIndex] else { throw FerryError(.invalidArgument, "creating an object of class '\(os.name)' needs its primary key '_id'") }
        return (row[os.primaryKeyIndex], fields, row)
    }

    private func layout(_ classIndex: Int) throws -> TableLayout {
        guard classIndex >= 0 && classIndex < layouts.count else {
            throw FerryError(.noSuchClass, "no class with key \(classIndex) (the schema has \(layouts.count))")
        }
        return layouts[classIndex]
    }

    public func create(classIndex: Int, values: [(Int, FerryValue)]) throws {
        try locked {
            let l = try layout(classIndex)
            let (key, fields, row) = try validatedFields(l, values)
            guard transaction != nil else { throw FerryError(.notInTransaction, "writes need a write transaction (begin one first)") }
            try store.insertRow(store.writer, classIndex, row)
            transaction?.append(.create(table: l.objectSchema.name, key: key, fields: fields))
        }
    }

    /// `create` for values borrowed from the caller's buffers (the C API's path): checked,
    /// bound and logged without copying them into Swift values.
    public func create(classIndex: Int, borrowing values: UnsafeBufferPointer<(Int, BorrowedValue)>) throws {
        try locked {
            let l = try layout(classIndex)
            guard transaction != nil else { throw FerryError(.notInTransaction, "writes need a write transaction (begin one first)") }
            let kinds = l.kinds
            guard kinds.count <= 64 else {
                return try createCopying(l, values)
            }
            var given: UInt64 = 0
            let pk = l.primaryKeyIndex
            for (index, value) in values {
                guard index >= 0 && index < kinds.count, given & (UInt64(1) << UInt64(index)) == 0,
                      !kinds[index].isList, kinds[index].accepts(value) else {
                    return try createCopying(l, values) // throws the precise error
                }
                given |= UInt64(1) << UInt64(index)
            }
            guard given & (UInt64(1) << UInt64(pk)) != 0 else { return try createCopying(l, values) }
            try store.insertRow(store.writer, l, given: given, values)
            // Taken out and put back so the log's buffer is appended to in place.
            guard var log = transaction.take() else { return }
            defer { transaction = log }
            log.appendCreate(l, given: given, values)
        }
    }

    private func createCopying(_ l: TableLayout, _ values: UnsafeBufferPointer<(Int, BorrowedValue)>) throws {
        let (key, fields, row) = try validatedFields(l, values.map { ($0.0, $0.1.value) })
        try store.insertRow(store.writer, l.classIndex, row)
        transaction?.append(.create(table: l.objectSchema.name, key: key, fields: fields))
    }

    public func upsert(classIndex: Int, values: [(Int, FerryValue)]) throws {
        try locked {
            let l = try layout(classIndex)
            let os = l.objectSchema
            let (key, fields, _) = try validatedFields(l, values)
            guard transaction != nil else { throw FerryError(.notInTransaction, "writes need a write transaction (begin one first)") }
            guard let existing = try store.readRow(store.writer, classIndex, key: key) else {
                try write(.create(table: os.name, key: key, fields: fields))
                return
            }
            for f in fields {
                if let i = os.propertyIndex(named: f.name), existing[i] != f.value { try write(.set(table: os.name, key: key, field: f.name, value: f.value)) }
            }
        }
    }

    public func set(classIndex: Int, key: FerryValue, property index: Int, value: FerryValue) throws {
        try locked {
            let os = try objectSchema(classIndex)
            let p = try property(os, index)
            try checkKey(os, key)
            guard !p.isPrimaryKey else { throw FerryError(.invalidArgument, "the primary key of '\(os.name)' cannot be changed") }
            guard !p.isList else { throw FerryError(.wrongType, "'\(os.name).\(p.name)' is a list; use the list operations") }
            try p.validateElement(value, className: os.name)
            try write(.set(table: os.name, key: key, field: p.name, value: value))
        }
    }

    public func addInteger(classIndex: Int, key: FerryValue, property index: Int, delta: Int64) throws {
        try locked {
            let os = try objectSchema(classIndex)
            let p = try property(os, index)
            try checkKey(os, key)
            guard p.type == .int, !p.isList, !p.isPrimaryKey else { throw FerryError(.wrongType, "'\(os.name).\(p.name)' is \(p.typeText), not a counter (int)") }
            try write(.addInteger(table: os.name, key: key, field: p.name, delta: delta))
        }
    }

    public func delete(classIndex: Int, key: FerryValue) throws {
        try locked {
            let os = try objectSchema(classIndex)
            try checkKey(os, key)
            try write(.erase(table: os.name, key: key))
        }
    }

    public enum ListOperation { case insert(Int, FerryValue), set(Int, FerryValue), erase(Int), clear }

    public func modifyList(classIndex: Int, key: FerryValue, property index: Int, _ op: ListOperation) throws {
        try locked {
            let os = try objectSchema(classIndex)
            let p = try property(os, index)
            try checkKey(os, key)
            guard p.isList else { throw FerryError(.wrongType, "'\(os.name).\(p.name)' is \(p.typeText), not a list") }
            switch op {
            case .insert(let i, let v):
                try p.validateElement(v, className: os.name)
                try write(.listInsert(table: os.name, key: key, field: p.name, index: i, value: v))
            case .set(let i, let v):
                try p.validateElement(v, className: os.name)
                try write(.listSet(table: os.name, key: key, field: p.name, index: i, value: v))
            case .erase(let i):
                try write(.listErase(table: os.name, key: key, field: p.name, index: i))
            case .clear:
                try write(.listClear(table: os.name, key: key, field: p.name))
            }
        }
    }

    // MARK: reads

    /// Runs a read on the writer inside this handle's transaction, else on the reader.
    func reading<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try locked {
            if transaction != nil { return try body(store.writer) }
            return try store.read(body)
        }
    }

    /// The object's values in schema order, or nil.
    public func object(classIndex: Int, key: FerryValue) throws -> [FerryValue]? {
        let os = try objectSchema(classIndex)
        try checkKey(os, key)
        return try reading { try store.readRow($0, classIndex, key: key) }
    }

    public func compile(classIndex: Int, query: String, arguments: [FerryValue]) throws -> CompiledQuery {
        try CompiledQuery(query, on: try objectSchema(classIndex), arguments: arguments)
    }

    /// The matching objects' values, sorted and limited as the query says.
    public func query(classIndex: Int, query: String, arguments: [FerryValue]) throws -> [[FerryValue]] {
        let q = try compile(classIndex: classIndex, query: query, arguments: arguments)
        return try reading { c in q.orderAndLimit(try store.matchingRows(c, q, classIndex: classIndex), values: { $0 }) }
    }

    /// SQLite's plan for the part of a query that runs in SQL (for tests and diagnostics).
    func queryPlan(classIndex: Int, query: String, arguments: [FerryValue]) throws -> String {
        let q = try compile(classIndex: classIndex, query: query, arguments: arguments)
        return try reading { c in try store.queryPlan(c, q, classIndex: classIndex) }
    }

    // MARK: notifications

    public func observeQuery(classIndex: Int, query: String, arguments: [FerryValue],
                             callback: @escaping (ChangeSummary) -> Void) throws -> ChangeObserver {
        let q = try compile(classIndex: classIndex, query: query, arguments: arguments)
        return try register(classIndex: classIndex, target: .query(q), callback: callback)
    }

    public func observeObject(classIndex: Int, key: FerryValue, callback: @escaping (ChangeSummary) -> Void) throws -> ChangeObserver {
        let os = try objectSchema(classIndex)
        try checkKey(os, key)
        return try register(classIndex: classIndex, target: .object(key: key), callback: callback)
    }

    private func register(classIndex: Int, target: ChangeObserver.Target, callback: @escaping (ChangeSummary) -> Void) throws -> ChangeObserver {
        try locked {
            let o = try store.read { c in
                let o = try ChangeObserver(store: store, reader: c, classIndex: classIndex, target: target, scheduler: scheduler, callback: callback)
                store.addObserver(o)
                return o
            }
            observers.append(o)
            return o
        }
    }

    /// Forgets an observer the host unregistered (the observer is already cancelled).
    public func forget(_ observer: ChangeObserver) {
        lock.withLock { observers.removeAll { $0 === observer } }
    }

    // MARK: sync access (Database+Sync)

    /// Calls `listener` (on the committing thread) after each local commit that changed
    /// something, on any handle of this file; nil removes it.
    public func setCommitListener(_ owner: AnyObject, _ listener: (@Sendable () -> Void)?) {
        store.setCommitListener(ObjectIdentifier(owner), listener)
    }

    var storeForSync: Store { store }

    /// The most instructions the last `resetToServerState` of this handle held decoded at once
    /// (its largest staged changeset): tests check with it that a reset's memory follows the
    /// size of one downloaded message, not of the whole state.
    var lastResetPeakInstructions: Int { lock.withLock { resetPeak } }

    func recordResetPeak(_ instructions: Int) { lock.withLock { resetPeak = instructions } }

    /// A read of the last commit, for the sync engine.
    func readingStore<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try locked { }
        return try store.read(body)
    }

    /// A write transaction of the sync engine's own (not logged in the history): `body`
    /// returns the instructions it applied, which observers are told about.
    func writingStore(_ body: (SQLiteConnection) throws -> [Instruction]?) throws {
        try writingStoreChanges { c in try body(c).flatMap { store.hasObservers || store.logsChanges ? CommittedChanges($0) : nil } }
    }

    /// `writingStore` for a body that builds the observers' summary itself as it goes (a
    /// client reset, which must not hold every instruction it applied), or returns nil.
    func writingStoreChanges(_ body: (SQLiteConnection) throws -> CommittedChanges?) throws {
        try locked { }
        // A fresh owner per call: sync writes from the loop thread and from the host's
        // threads (subscription updates) wait for each other like any two handles.
        let token = SyncWriter()
        let owner = ObjectIdentifier(token)
        try store.acquireWriteLock(for: owner)
        defer { withExtendedLifetime(token) { store.releaseWriteLock(for: owner) } }
        do {
            let changes = try body(store.writer)
            if let changes { try store.logChanges(changes) }
            try store.commitAndPublish(store.hasObservers ? changes : nil)
        } catch {
            store.writer.rollback()
            store.forgetOwnCommits()
            throw error
        }
    }
}
