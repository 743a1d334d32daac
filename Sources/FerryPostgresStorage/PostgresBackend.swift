import FerryCore
import Logging
import PostgresNIO

/// One server's PostgreSQL backend: a connection pool (postgres-nio's `PostgresClient`, run in
/// a task of its own until `close`), the schema migrated on open, and the sync store and user
/// directory over that pool.
public final class PostgresBackend: Sendable {
    public let location: PostgresLocation
    public let storage: PostgresSyncStorage
    public let users: PostgresUserDirectory
    public let operations: PostgresOperationsStorage
    private let client: PostgresClient
    /// The pool's size (`maximumConnections`).
    public let poolSize: Int

    private init(location: PostgresLocation, storage: PostgresSyncStorage, users: PostgresUserDirectory, operations: PostgresOperationsStorage,
                 client: PostgresClient, poolSize: Int) {
        self.location = location
        self.storage = storage
        self.users = users
        self.operations = operations
        self.client = client
        self.poolSize = poolSize
    }

    /// The pool's connections Ferry holds now (the rest of `poolSize` is idle or not yet open).
    public var poolConnectionsInUse: Int { BoundedLease.connectionsInUse(of: client) }

    /// Connects, migrates the schema (nodes starting together take turns, see
    /// `PostgresMigrations`) and opens the store. A first connection is made on its own before
    /// the pool, so that a wrong password or an unreachable host fails here with PostgreSQL's
    /// reason instead of leaving the pool retrying in the background.
    ///
    /// - Parameters:
    ///   - maximumConnections: the pool's size; a write transaction, a snapshot and the change
    ///     feed's listener each hold one connection while they last.
    ///   - feedPollInterval: how often the change feed re-reads head and revision besides
    ///     NOTIFY (the longest a lost notification delays a signal).
    public static func open(_ location: PostgresLocation, logger: Logger, maximumConnections: Int = 20,
                            feedPollInterval: Duration = .milliseconds(250)) async throws -> PostgresBackend {
        try await probe(location, logger: logger)
        let client = PostgresClient(configuration: location.clientConfiguration(maximumConnections: max(2, maximumConnections)),
                                    backgroundLogger: logger)
        // Started immediately, so the client is running before the first lease (postgres-nio
        // warns about a lease before `run()`).
        let run = Task.immediate { await client.run() }
        let stop: @Sendable () async -> Void = {
            run.cancel()
            await run.value
        }
        do {
            try await PostgresMigrations.run(client, logger: logger)
            let state = try await PostgresSyncMeta.readState(client, logger: logger)
            let storage = PostgresSyncStorage(client: client, location: location, logger: logger, initial: state, maximumConnections: max(2, maximumConnections),
                                              feedPollInterval: feedPollInterval, stopClient: stop)
            let users = PostgresUserDirectory(client: client, logger: logger)
            logger.info("PostgreSQL: opened \(location) at version \(state.headVersion)")
            return PostgresBackend(location: location, storage: storage, users: users, operations: PostgresOperationsStorage(client: client, logger: logger),
                                   client: client, poolSize: max(2, maximumConnections))
        } catch {
            await stop()
            throw error
        }
    }

    private static func probe(_ location: PostgresLocation, logger: Logger) async throws {
        try await PostgresFailure.run("connecting to \(location)") {
            let connection = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 0, logger: logger)
            // Closing a connection already given up on: its failure changes nothing.
            try? await connection.close()
        }
    }

    /// Stops the change feed and closes every connection; later calls of the store and the
    /// directory fail. A second call does nothing.
    public func close() async {
        await storage.close()
    }
}
