import FerryCore
import Foundation
import Logging
import NIOConcurrencyHelpers
import PostgresNIO

/// Every query of the store goes through here. postgres-nio 1.33.2 hands a query to its channel
/// with `channel.write(task, promise: nil)`: when the channel is already closed (the database
/// connection was reset a moment before: a node cut off from PostgreSQL), the write fails
/// silently and the query's promise is never completed, so the caller waits for ever. The
/// cluster fault test hit exactly that: a write transaction hung on its first read after the
/// cut and held the node's writer turn, and every later upload of that node waited behind it.
/// Here the query runs in a task of its own while the caller waits on a continuation that is
/// also resumed with an error once the connection is seen closed (checked every 100 ms), so
/// the caller always gets an answer; a query abandoned that way stays parked on the dead
/// connection (one small task per incident).
extension PostgresConnection {
    @discardableResult
    func guardedQuery(_ query: PostgresQuery, logger: Logger) async throws -> CollectedRows {
        let answer = AnswerOnce()
        let connection = self
        return try await withCheckedThrowingContinuation { (c: CheckedContinuation<CollectedRows, Error>) in
            answer.set(c)
            Task {
                do { answer.resume(.success(CollectedRows(rows: try await connection.query(query, logger: logger).collect()))) } catch {
                    answer.resume(.failure(error))
                }
            }
            Task {
                while !answer.isDone {
                    // Throws only when cancelled: the retry loop sees the cancellation next.
                    try? await Task.sleep(for: .milliseconds(100))
                    if connection.isClosed {
                        answer.resume(.failure(FerryError(.io, "the connection to PostgreSQL closed before the query was answered")))
                        return
                    }
                }
            }
        }
    }
}

/// A query's rows, all read (every query of the store reads pages of bounded size).
struct CollectedRows: Sendable {
    let rows: [PostgresRow]
    func collect() -> [PostgresRow] { rows }
}

/// Resumes a continuation once, whichever of the query and the watch answers first.
private final class AnswerOnce: @unchecked Sendable {
    private let lock = ThreadLock()
    private var continuation: CheckedContinuation<CollectedRows, Error>?
    private var pending: Result<CollectedRows, Error>?
    private var done = false

    var isDone: Bool { lock.withLock { done } }

    func set(_ c: CheckedContinuation<CollectedRows, Error>) {
        let early: Result<CollectedRows, Error>? = lock.withLock {
            if let pending { self.pending = nil; return pending }
            continuation = c
            return nil
        }
        if let early { c.resume(with: early) }
    }

    func resume(_ result: Result<CollectedRows, Error>) {
        let target: CheckedContinuation<CollectedRows, Error>? = lock.withLock {
            guard !done else { return nil }
            done = true
            if let c = continuation { continuation = nil; return c }
            pending = result
            return nil
        }
        target?.resume(with: result)
    }
}
