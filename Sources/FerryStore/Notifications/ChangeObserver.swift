import FerryCore
import FerrySQLite

/// What a notification callback receives: objects by primary key, and the properties changed
/// on the modified ones (by index in the class).
public struct ChangeSummary: Sendable {
    public var inserted: [FerryValue] = []
    public var deleted: [FerryValue] = []
    public var modified: [FerryValue] = []
    public var modifiedProperties: [Int] = []
    public var isEmpty: Bool { inserted.isEmpty && deleted.isEmpty && modified.isEmpty }
}

/// One registration: a query's results or one object. Commits enqueue what they touched; the
/// scheduler later calls `deliver`, which compares the observed state with the last one it
/// reported and calls the callback when something changed. Several commits between two
/// deliveries are reported together.
public final class ChangeObserver: @unchecked Sendable {
    public enum Target {
        case query(CompiledQuery)
        case object(key: FerryValue)
    }

    let target: Target
    let classIndex: Int
    private weak var store: Store?
    private let scheduler: NotificationScheduler
    private var callback: ((ChangeSummary) -> Void)?

    /// Guards `pending` and `cancelled`.
    private let stateLock = ThreadLock()
    private var pending = CommittedChanges([])
    private var cancelled = false
    /// Held while the callback runs, so `cancel()` from another thread waits for it to finish.
    private let deliveryLock = ThreadLock()
    private var deliveringThread: UInt = 0
    /// The last reported state: result keys in order, or whether the object existed.
    private var lastKeys: [FerryValue] = []
    /// The same keys as a set, for the incremental path of unsorted, unlimited queries.
    private var lastSet: Set<FerryValue> = []
    /// Whether `lastKeys` is up to date (the incremental path updates only the set).
    private var lastKeysCurrent = true
    private var objectExisted = false
    private let className: String

    /// Reads the initial state through `c`, the reader connection, which the caller holds
    /// locked while it also registers the observer, so no commit falls between the two.
    init(store: Store, reader c: SQLiteConnection, classIndex: Int, target: Target, scheduler: NotificationScheduler, callback: @escaping (ChangeSummary) -> Void) throws {
        self.store = store
        self.classIndex = classIndex
        self.target = target
        self.scheduler = scheduler
        self.callback = callback
        className = store.schema.classes[classIndex].name
        switch target {
        case .query(let q):
            lastKeys = try Self.keys(store, c, q, classIndex)
            lastSet = Set(lastKeys)
        case .object(let key): objectExisted = try store.readRow(c, classIndex, key: key) != nil
        }
    }

    private static func keys(_ store: Store, _ c: SQLiteConnection, _ q: CompiledQuery, _ classIndex: Int) throws -> [FerryValue] {
        let pk = q.objectSchema.primaryKeyIndex
        return q.orderAndLimit(try store.matchingRows(c, q, classIndex: classIndex), values: { $0 }).map { $0[pk] }
    }

    /// Called by the store after each commit.
    func enqueue(_ changes: CommittedChanges) {
        guard let touched = changes.byClass[className] else { return }
        if case .object(let key) = target, touched[key] == nil { return }
        let first: Bool = stateLock.withLock {
            if cancelled { return false }
            let wasEmpty = pending.isEmpty
            pending.merge(changes)
            return wasEmpty
        }
        if first { scheduler.schedule { [weak self] in self?.deliver() ?? false } }
    }

    /// Computes and reports what changed since the last delivery. The pending changes are taken
    /// and the state read under the store's reader lock, so the two always describe the same
    /// commits. Returns whether the callback ran.
    @discardableResult
    func deliver() -> Bool {
        deliveryLock.lock()
        stateLock.withLock { deliveringThread = currentThreadID() }
        defer {
            stateLock.withLock { deliveringThread = 0 }
            deliveryLock.unlock()
        }
        guard let store, let callback = stateLock.withLock({ cancelled ? nil : callback }) else { return false }
        let os = store.schema.classes[classIndex]
        var summary = ChangeSummary()
        var properties = Set<String>()
        do {
            try store.read { c in
                let changes = stateLock.withLock { () -> CommittedChanges in
                    defer { pending = CommittedChanges([]) }
                    return pending
                }
                guard !changes.isEmpty else { return }
                let touched = changes.byClass[className] ?? [:]
                switch target {
                case .query(let q) where q.sort.isEmpty && q.limit == nil && touched.count <= max(64, lastSet.count / 8):
                    // Only the touched objects can have entered, left or changed: check those
                    // (a commit of a few objects costs a few lookups, not a re-run of the query).
                    var inserted: [(Int64, FerryValue)] = []
                    for (key, t) in touched {
                        let row = try store.readRow(c, classIndex, key: key)
                        let nowIn = row.map { q.matches($0) } ?? false
                        let wasIn = lastSet.contains(key)
                        if nowIn && !wasIn {
                            inserted.append((try store.rowid(c, classIndex, key: key) ?? 0, key))
                            lastSet.insert(key)
                        } else if !nowIn && wasIn {
                            summary.deleted.append(key)
                            lastSet.remove(key)
                        } else if nowIn {
                            summary.modified.append(key)
                            properties.formUnion(t.properties)
                        }
                    }
                    // Results keep insertion order: new ones in rowid order.
                    summary.inserted = inserted.sorted { $0.0 < $1.0 }.map(\.1)
                    if !summary.inserted.isEmpty || !summary.deleted.isEmpty { lastKeysCurrent = false }
                case .query(let q):
                    let now = try Self.keys(store, c, q, classIndex)
                    let after = Set(now)
                    summary.inserted = now.filter { !lastSet.contains($0) }
                    summary.deleted = lastKeysCurrent ? lastKeys.filter { !after.contains($0) } : Array(lastSet.subtracting(after))
                    for key in now where lastSet.contains(key) {
                        if let t = touched[key] {
                            summary.modified.append(key)
                            properties.formUnion(t.properties)
                        }
                    }
                    lastKeys = now
                    lastSet = after
                    lastKeysCurrent = true
                case .object(let key):
                    let exists = try store.readRow(c, classIndex, key: key) != nil
                    if exists && !objectExisted { summary.inserted = [key] }
                    else if !exists && objectExisted { summary.deleted = [key] }
                    else if exists, let t = touched[key] {
                        summary.modified = [key]
                        properties = t.properties
                    }
                    objectExisted = exists
                }
            }
        } catch {
            return false // the database was closed under us: nothing more to report
        }
        summary.modifiedProperties = properties.compactMap { os.propertyIndex(named: $0) }.sorted()
        guard !summary.isEmpty else { return false }
        callback(summary)
        return true
    }

    /// Stops delivery. When it returns the callback is not running on another thread and will
    /// not run again. Safe to call from inside the callback.
    public func cancel() {
        stateLock.withLock {
            cancelled = true
            pending = CommittedChanges([])
        }
        store?.removeObserver(self)
        let insideCallback = stateLock.withLock { deliveringThread == currentThreadID() }
        if !insideCallback {
            // Waits for a delivery running on another thread to finish.
            deliveryLock.withLock { stateLock.withLock { callback = nil } }
        } else {
            stateLock.withLock { callback = nil }
        }
    }
}
