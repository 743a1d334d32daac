import FerrySQLiteStorage
import Foundation

/// The embedded backend's place: a new temporary directory holding `sync.sqlite` and
/// `users.sqlite`, as the server's data directory does.
struct SQLitePlace: StorePlace {
    let directory: URL

    static func make() throws -> SQLitePlace {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-conformance-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return SQLitePlace(directory: dir)
    }

    func open() async throws -> OpenStore {
        let storage = try SQLiteSyncStorage(path: directory.appendingPathComponent("sync.sqlite").path)
        let users: SQLiteUserDirectory
        do {
            users = try SQLiteUserDirectory(path: directory.appendingPathComponent("users.sqlite").path)
        } catch {
            await storage.close()
            throw error
        }
        let operations: SQLiteOperationsStorage
        do {
            operations = try SQLiteOperationsStorage(path: directory.appendingPathComponent("operations.sqlite").path)
        } catch {
            await storage.close()
            users.close()
            throw error
        }
        return OpenStore(storage: storage, users: users, operations: operations) {
            await storage.close()
            users.close()
            await operations.closeOperations()
        }
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}
