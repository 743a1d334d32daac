import Foundation
import Logging
import PostgresNIO

/// Closes a leased connection whose work has not finished by a deadline, so that work fails
/// instead of waiting for ever (a lock wait behind a node that died inside a transaction, a
/// database that stopped answering). Once the connection is closed, `guardedQuery` fails
/// whatever is pending on it; the transaction is not committed (the server rolls it back), so
/// nothing acknowledged is lost and the device uploads again.
enum ConnectionWatchdog {
    /// How long one store operation on a leased connection may take (a write transaction, a
    /// page of a read). Long reads are many operations, each under it.
    static let defaultDeadline: Duration = .seconds(30)

    nonisolated(nonsending) static func run<T>(_ connection: PostgresConnection, deadline: Duration = defaultDeadline, what: String, logger: Logger,
                       _ body: () async throws -> T) async throws -> T {
        let watchdog = Task {
            do { try await Task.sleep(for: deadline) } catch { return }
            logger.error("PostgreSQL: \(what) took longer than \(deadline); closing its connection so it fails")
            // Closing a connection already given up on: its failure changes nothing.
            try? await connection.close()
        }
        defer { watchdog.cancel() }
        return try await body()
    }
}
