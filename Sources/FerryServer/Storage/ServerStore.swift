import Foundation
import FerryAppConfig
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
    /// The sync log and the cluster's live connections.
    let operations: any OperationsStorage
    /// Triggers' cursors and leases, beside the operations data.
    let triggers: any TriggerStorage
    /// PostgreSQL's pool and change feed as the metrics show them (nil on the embedded store).
    let database: (@Sendable () -> DatabaseGauges)?
    /// The store whose SQL tables capture a backend's SQL writes (nil: no SQL tables).
    var capturedWrites: PostgresSyncStorage? = nil
    private let closeBackend: @Sendable () async -> Void

    static func open(_ configuration: ServerConfiguration, app: AppConfiguration? = nil, logger: Logger) async throws -> ServerStore {
        switch configuration.database {
        case .embedded:
            let sync = try SQLiteSyncStorage(path: configuration.dataDirectory + "/sync.sqlite")
            let users = try SQLiteUserDirectory(path: configuration.dataDirectory + "/users.sqlite")
            let operations = try SQLiteOperationsStorage(path: configuration.dataDirectory + "/operations.sqlite")
            return ServerStore(sync: sync, users: users, operations: operations, triggers: operations, database: nil, closeBackend: {
                await sync.close()
                users.close()
                await operations.closeOperations()
            })
        case .postgres(let url):
            var location: PostgresLocation
            do { location = try PostgresLocation(url: url) } catch {
                throw ServerStartError("bad --database URL: \(error)")
            }
            // The password need not be in the URL, where a process list or a shell history
            // shows it (issue 22, point 8): a file (a mounted secret) or the environment.
            if location.password == nil, let file = configuration.secrets["FERRY_DATABASE_PASSWORD_FILE"], !file.isEmpty {
                guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                    throw ServerStartError("cannot read the database password from FERRY_DATABASE_PASSWORD_FILE (\(file))")
                }
                location.password = String(text.trimmingCharacters(in: .newlines))
            } else if location.password == nil, let password = configuration.secrets["FERRY_DATABASE_PASSWORD"], !password.isEmpty {
                location.password = password
            }
            let backend: PostgresBackend
            do { backend = try await PostgresBackend.open(location, logger: logger, maximumConnections: configuration.databaseConnections) } catch {
                throw ServerStartError("cannot open the PostgreSQL database \(location): \(error)")
            }
            // The SQL tables follow the app's schema (tests that open a bare store pass no app).
            if let name = configuration.sqlTablesSchema, let app {
                do {
                    try await prepareSQLTables(backend.storage, app: app, schemaName: name, rebuild: configuration.rebuildSQLTables, logger: logger)
                } catch {
                    await backend.close()
                    throw ServerStartError("cannot prepare the SQL tables in schema \(name): \(error)")
                }
            }
            var store = ServerStore(sync: backend.storage, users: backend.users, operations: backend.operations, triggers: backend.operations,
                                    database: {
                                        DatabaseGauges(poolInUse: backend.poolConnectionsInUse, poolSize: backend.poolSize,
                                                       changeFeedLagSeconds: backend.storage.changeFeedLagSeconds)
                                    }, closeBackend: { await backend.close() })
            if configuration.sqlTablesSchema != nil, app != nil { store.capturedWrites = backend.storage }
            return store
        }
    }

    func close() async { await closeBackend() }

    /// The app's classes as tables in `schemaName`, indexed on their indexed properties and
    /// the app's queryable fields.
    private static func prepareSQLTables(_ storage: PostgresSyncStorage, app: AppConfiguration, schemaName: String, rebuild: Bool, logger: Logger) async throws {
        let schema = try app.schema
        var indexed: [String: Set<String>] = [:]
        for os in schema.classes {
            indexed[os.name] = Set(app.sync.queryableFields + app.sync.indexedQueryableFields + (app.sync.collectionQueryableFields[os.name] ?? []))
        }
        let done = try await storage.prepareSQLTables(try PostgresSQLTables(schema: schema, schemaName: schemaName, indexed: indexed), rebuild: rebuild)
        for (table, what) in done.sorted(by: { $0.key < $1.key }) where what != .unchanged {
            logger.info("SQL table \(schemaName).\(table): \(what)")
        }
    }
}
