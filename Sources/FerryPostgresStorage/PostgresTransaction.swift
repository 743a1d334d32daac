import Logging
import PostgresNIO

/// BEGIN, the body, COMMIT, on one leased connection. Unlike postgres-nio's `withTransaction`,
/// the body's own error is rethrown unchanged (the sync hub tells its errors apart), and a
/// connection whose ROLLBACK failed is closed, so the pool never hands out a connection still
/// inside a failed transaction. Returns only once COMMIT succeeded.
enum PostgresTransaction {
    static func run<T>(_ connection: PostgresConnection, begin: String = "BEGIN", logger: Logger,
                       _ body: () async throws -> T) async throws -> T {
        try await PostgresFailure.run("BEGIN") { try await connection.guardedQuery(PostgresQuery(unsafeSQL: begin), logger: logger) }
        let result: T
        do {
            result = try await body()
        } catch {
            await rollback(connection, logger: logger)
            throw error
        }
        // A COMMIT that fails is never reported as success. Its outcome is not known, though:
        // when the connection breaks after PostgreSQL committed but before its reply arrived, the
        // transaction is durable and the caller hears an error. The sync hub is built for that:
        // it acknowledges nothing it did not see commit, and the device's re-sent upload is
        // recognised by its client version (already integrated) and not applied twice.
        try await PostgresFailure.run("COMMIT (its outcome is unknown: it may have committed)") {
            try await connection.guardedQuery("COMMIT", logger: logger)
        }
        return result
    }

    static func rollback(_ connection: PostgresConnection, logger: Logger) async {
        do {
            try await connection.guardedQuery("ROLLBACK", logger: logger)
        } catch {
            logger.warning("PostgreSQL: ROLLBACK failed, closing the connection: \(PostgresFailure.describe(error))")
            let _: EventLoopFuture<Void> = connection.close()
        }
    }
}
