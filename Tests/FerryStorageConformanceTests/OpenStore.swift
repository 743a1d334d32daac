import FerryCore
import FerryAuth
import FerrySyncStorage
import Foundation

/// One backend's store, opened: its sync storage and its user directory over one place.
struct OpenStore: Sendable {
    let storage: any SyncStorage
    let users: any UserDirectory
    /// The sync log and the published connections.
    let operations: any OperationsStorage
    private let closing: Once

    init(storage: any SyncStorage, users: any UserDirectory, operations: any OperationsStorage, close: @escaping @Sendable () async -> Void) {
        self.storage = storage
        self.users = users
        self.operations = operations
        closing = Once(close)
    }

    /// Closes both; a second call does nothing (a test that closes the store itself is still
    /// closed again by `Backend.withStore` on its way out).
    func close() async { await closing.run() }
}

/// Where a backend keeps a store: opening it again opens the same data, as a restarted server
/// (or a second node) would.
protocol StorePlace: Sendable {
    func open() async throws -> OpenStore
}

/// Runs an async action at most once.
final class Once: @unchecked Sendable {
    private let lock = ThreadLock()
    private var action: (@Sendable () async -> Void)?

    init(_ action: @escaping @Sendable () async -> Void) { self.action = action }

    func run() async {
        let taken: (@Sendable () async -> Void)? = lock.withLock {
            defer { action = nil }
            return action
        }
        await taken?()
    }
}

extension StorePlace {
    /// Opens the store, runs `body`, and closes it again (also when `body` throws).
    func withOpen<T: Sendable>(_ body: (OpenStore) async throws -> T) async throws -> T {
        let store = try await open()
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }
}
