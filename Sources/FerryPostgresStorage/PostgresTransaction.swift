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
        // A failed COMMIT ends the transaction on the server (or the connection is gone): the
        // outcome is "not committed" as far as the caller can know, so it must not report success.
        try await PostgresFailure.run("COMMIT") { try await connection.guardedQuery("COMMIT", logger: logger) }
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
