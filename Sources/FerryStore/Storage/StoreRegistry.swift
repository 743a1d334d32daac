import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// The stores open in this process, by location, so handles on one file share one store (one
/// writer lock, one set of observers). A store found here after a `fork` belongs to the
/// parent and is never shared with the child.
final class StoreRegistry: @unchecked Sendable {
    static let shared = StoreRegistry()
    private let lock = ThreadLock()
    private var stores: [String: Store] = [:]

    /// The store for a location, opened if needed, with one more handle counted.
    func acquire(_ location: StoreLocation, schema: Schema?, synced: Bool, key: EncryptionKey? = nil, standby: Bool = false) throws -> Store {
        try lock.withLock {
            if let s = stores[location.key], s.pid == getpid() {
                try s.checkCompatible(schema: schema, synced: synced, key: key)
                // A handle that asks to sync a file this process has open without the role
                // takes it now, or (unless it may wait in standby) fails as a first open would.
                if synced, !standby, !(try s.tryBecomeSyncAgent()) {
                    throw FerryError(.multipleSyncAgents, "'\(location.displayName)' is a synced database and another process is its sync agent")
                }
                s.handleCount += 1
                return s
            }
            let s = try Store(location: location, schema: schema, synced: synced, key: key, standby: standby)
            s.handleCount = 1
            stores[location.key] = s
            return s
        }
    }

    func isOpen(_ location: StoreLocation) -> Bool {
        lock.withLock { stores[location.key].map { $0.pid == getpid() } ?? false }
    }

    func handleCount(_ store: Store) -> Int { lock.withLock { store.handleCount } }

    /// One handle fewer; the last one closes the store (an in-memory database is dropped).
    func release(_ store: Store) {
        lock.withLock {
            store.handleCount -= 1
            if store.handleCount == 0 {
                if stores[store.location.key] === store { stores[store.location.key] = nil }
                store.close()
            }
        }
    }
}
