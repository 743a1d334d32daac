import Foundation
import Logging
import PostgresNIO

/// LISTEN on a channel for as long as the calling task lives: on a pooled connection held
/// while it lasts, and after it dies (or fails to start) again after a backoff of 0.1 s
/// doubling up to 5 s. NOTIFY is only a hint (one sent while the listener was reconnecting is
/// gone), so `listening` runs each time the listener (re)connects, to read what committed
/// meanwhile. Used by the change feed (`ferry_changes`) and the capture of SQL writes
/// (`ferry_sql_writes`); `what` names the listener in the log.
enum PostgresListener {
    static func run(_ client: PostgresClient, channel: String, what: String, logger: Logger,
                    listening: () async throws -> Void, notified: (PostgresNotification) async throws -> Void) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: channel) { notifications in
                        try await listening()
                        if failures > 0 { logger.info("PostgreSQL: \(what) listens again") }
                        failures = 0
                        for try await notification in notifications { try await notified(notification) }
                    }
                }
                if Task.isCancelled { return }
                logger.warning("PostgreSQL: \(what)'s listener stopped; reconnecting")
            } catch {
                if Task.isCancelled { return }
                logger.warning("PostgreSQL: \(what)'s listener failed; reconnecting: \(PostgresFailure.describe(error))")
            }
            failures += 1
            let delay = min(0.1 * pow(2, Double(min(failures - 1, 10))), 5)
            do { try await Task.sleep(for: .seconds(delay)) } catch { return }
        }
    }
}
