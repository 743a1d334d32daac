import FerryAuth
import FerryPostgresStorage
import FerrySQLiteStorage
import FerrySyncStorage
import Logging

/// The opened backend of one server: its sync store and user directory, from the
/// configuration's `DatabaseLocation`.
struct ServerStore: Sendable {
    let sync: any SyncStorage
    let users: any UserDirectory
    private let closeBackend: @Sendable () async -> Void

    static func open(_ configuration: ServerConfiguration, logger: Logger) async throws -> ServerStore {
        switch configuration.database {
        case .embedded:
            let sync = try SQLiteSyncStorage(path: configuration.dataDirectory + "/sync.sqlite")
            let users = try SQLiteUserDirectory(path: configuration.dataDirectory + "/users.sqlite")
            return ServerStore(sync: sync, users: users, closeBackend: {
                await sync.close()
                users.close()
            })
        case .postgres(let url):
            let location: PostgresLocation
            do { location = try PostgresLocation(url: url) } catch {
                throw ServerStartError("bad --database URL: \(error)")
            }
            let backend: PostgresBackend
            do { backend = try await PostgresBackend.open(location, logger: logger, maximumConnections: configuration.databaseConnections) } catch {
                throw ServerStartError("cannot open the PostgreSQL database \(location): \(error)")
            }
            return ServerStore(sync: backend.storage, users: backend.users, closeBackend: { await backend.close() })
        }
    }

    func close() async { await closeBackend() }
}
