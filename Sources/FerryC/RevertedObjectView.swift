import CFerry
import FerryCore
import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// The C view of a `RevertedObject` (SPEC F-NOLOSS): a `ferry_reverted_object_t` and everything
/// it points to, in memory this object owns. Views are found by the struct's address in
/// `RevertedRecords`, so a pointer the host passes back is checked, never trusted.
final class RevertedObjectView: @unchecked Sendable {
    let object: RevertedObject
    let pointer: UnsafeMutablePointer<ferry_reverted_object_t>
    private let storage = CValueStorage()
    private let values: UnsafeMutableBufferPointer<ferry_reverted_value_t>
    private let writes: UnsafeMutableBufferPointer<ferry_local_write_t>

    init(_ r: RevertedObject) {
        object = r
        values = .allocate(capacity: r.values.count)
        writes = .allocate(capacity: r.writes.count)
        for (i, v) in r.values.enumerated() {
            var c = ferry_reverted_value_t()
            c.property = UInt32(truncatingIfNeeded: v.property)
            c.name = storage.cString(v.name)
            if case .list(let items) = v.value {
                c.is_list = true
                c.list = storage.cArray(items)
                c.list_count = items.count
            } else {
                c.value = storage.cValue(v.value)
            }
            values.initializeElement(at: i, to: c)
        }
        for (i, w) in r.writes.enumerated() { writes.initializeElement(at: i, to: Self.cWrite(w, storage)) }
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: ferry_reverted_object_t(
            object_type: storage.cString(r.objectType), primary_key: storage.cValue(r.primaryKey), revert: r.revert.rawValue,
            values: r.values.isEmpty ? nil : UnsafePointer(values.baseAddress), values_count: r.values.count,
            writes: r.writes.isEmpty ? nil : UnsafePointer(writes.baseAddress), writes_count: r.writes.count))
    }

    deinit {
        pointer.deallocate()
        values.deallocate()
        writes.deallocate()
    }

    private static func cWrite(_ w: LocalWrite, _ storage: CValueStorage) -> ferry_local_write_t {
        var c = ferry_local_write_t()
        c.local_version = w.version
        func kind(_ k: ferry_write_kind_t) -> Int32 { Int32(k.rawValue) }
        if let f = w.instruction.field { c.property = storage.cString(f) }
        switch w.instruction {
        case .create: c.kind = kind(FERRY_WRITE_CREATE)
        case .erase: c.kind = kind(FERRY_WRITE_DELETE)
        case .set(_, _, _, let v): c.kind = kind(FERRY_WRITE_SET); c.value = storage.cValue(v)
        case .addInteger(_, _, _, let d): c.kind = kind(FERRY_WRITE_ADD_INT); c.value = storage.cValue(.int(d))
        case .listInsert(_, _, _, let i, let v): c.kind = kind(FERRY_WRITE_LIST_INSERT); c.index = max(i, 0); c.value = storage.cValue(v)
        case .listSet(_, _, _, let i, let v): c.kind = kind(FERRY_WRITE_LIST_SET); c.index = max(i, 0); c.value = storage.cValue(v)
        case .listErase(_, _, _, let i): c.kind = kind(FERRY_WRITE_LIST_ERASE); c.index = max(i, 0)
        case .listClear: c.kind = kind(FERRY_WRITE_LIST_CLEAR)
        }
        return c
    }
}

/// The records Ferry has handed out: lent ones (while their sync error's handler runs) and the
/// host's copies, by address; and the lent sync errors' records by the error's address.
final class RevertedRecords: @unchecked Sendable {
    static let shared = RevertedRecords()
    private let lock = ThreadLock()
    private var records: [UInt: (view: RevertedObjectView, owned: Bool)] = [:]
    private var errors: [UInt: [RevertedObjectView?]] = [:]

    private static func address<T>(_ p: UnsafePointer<T>) -> UInt { UInt(bitPattern: p) }

    /// Lends the records of a sync error (one per compensating write, nil where nothing was
    /// taken) for the duration of `body`.
    func lending<R>(_ error: UnsafePointer<ferry_sync_error_t>, _ views: [RevertedObjectView?], _ body: () -> R) -> R {
        let e = Self.address(error)
        lock.withLock {
            errors[e] = views
            for v in views.compactMap({ $0 }) { records[Self.address(UnsafePointer(v.pointer))] = (v, false) }
        }
        defer {
            lock.withLock {
                errors[e] = nil
                for v in views.compactMap({ $0 }) where records[Self.address(UnsafePointer(v.pointer))]?.owned == false {
                    records[Self.address(UnsafePointer(v.pointer))] = nil
                }
            }
        }
        return body()
    }

    func lent(_ error: UnsafePointer<ferry_sync_error_t>) -> [RevertedObjectView?]? { lock.withLock { errors[Self.address(error)] } }

    func view(_ p: UnsafePointer<ferry_reverted_object_t>) -> RevertedObjectView? { lock.withLock { records[Self.address(p)]?.view } }

    /// A new copy owned by the host.
    func copy(_ object: RevertedObject) -> UnsafeMutablePointer<ferry_reverted_object_t> {
        let v = RevertedObjectView(object)
        lock.withLock { records[Self.address(UnsafePointer(v.pointer))] = (v, true) }
        return v.pointer
    }

    /// Frees a host's copy; anything else is left alone.
    func free(_ p: UnsafePointer<ferry_reverted_object_t>) {
        let v: RevertedObjectView? = lock.withLock {
            guard let r = records[Self.address(p)], r.owned else { return nil }
            records[Self.address(p)] = nil
            return r.view
        }
        withExtendedLifetime(v) {}
    }
}
