import FerryCore
import Foundation
import PostgresNIO

/// A connection leased from the pool within a deadline. postgres-nio's pool keeps a lease
/// request waiting while it retries connecting to an unreachable database (70 s was seen in the
/// outage test); a node must instead fail the operation within seconds, so its devices are told
/// to try again (503) and nothing waits on a dead database. The lease is taken by a task of its
/// own that holds the connection until `release()`; if the deadline passes first, that task is
/// cancelled and a connection it still gets later goes straight back to the pool.
final class BoundedLease: @unchecked Sendable {
    let connection: PostgresConnection
    private let done: Handoff

    private init(connection: PostgresConnection, done: Handoff) {
        self.connection = connection
        self.done = done
    }

    /// Gives the connection back to the pool.
    func release() { done.release() }

    /// Connections taken out of each pool through a lease and not yet given back (the pool
    /// metric `ferry_db_pool_connections`): postgres-nio does not publish its pool's use.
    private static let inUse = LockedValue<[ObjectIdentifier: Int]>([:])

    /// How many of `client`'s connections leases hold now.
    static func connectionsInUse(of client: PostgresClient) -> Int { inUse.withLock { $0[ObjectIdentifier(client)] ?? 0 } }

    static func lease(from client: PostgresClient, within deadline: Duration) async throws -> BoundedLease {
        let handoff = Handoff()
        let holder = Task {
            do {
                try await client.withConnection { connection in
                    inUse.withLock { $0[ObjectIdentifier(client), default: 0] += 1 }
                    defer { inUse.withLock { $0[ObjectIdentifier(client), default: 1] -= 1 } }
                    guard handoff.deliver(connection) else { return }   // abandoned: back to the pool
                    await handoff.waitForRelease()
                }
            } catch {
                handoff.fail(error)
            }
        }
        let timer = Task {
            do { try await Task.sleep(for: deadline) } catch { return }
            if handoff.fail(FerryError(.io, "no connection to PostgreSQL within \(deadline) (is the database reachable?)")) { holder.cancel() }
        }
        defer { timer.cancel() }
        let connection = try await handoff.connection()
        return BoundedLease(connection: connection, done: handoff)
    }
}

/// The hand-over between the task that leases and the caller, each side resumed once.
private final class Handoff: @unchecked Sendable {
    private enum State {
        case waiting(CheckedContinuation<PostgresConnection, Error>?)
        case delivered(PostgresConnection)
        case failed(Error)
        case leased
        case released
    }
    private let lock = ThreadLock()
    private var state: State = .waiting(nil)
    private var releaseWaiter: CheckedContinuation<Void, Never>?
    private var releasedEarly = false

    /// The caller waits for the connection (or the failure).
    func connection() async throws -> PostgresConnection {
        try await withCheckedThrowingContinuation { c in
            let now: Result<PostgresConnection, Error>? = lock.withLock {
                switch state {
                case .delivered(let connection): state = .leased; return .success(connection)
                case .failed(let error): return .failure(error)
                default: state = .waiting(c); return nil
                }
            }
            if let now { c.resume(with: now) }
        }
    }

    /// The leasing task has a connection: false if the caller gave up (then it goes back).
    func deliver(_ connection: PostgresConnection) -> Bool {
        let waiter: CheckedContinuation<PostgresConnection, Error>?? = lock.withLock {
            switch state {
            case .waiting(let c):
                if c != nil { state = .leased } else { state = .delivered(connection) }
                return .some(c)
            default: return .none
            }
        }
        guard let waiter else { return false }
        waiter?.resume(returning: connection)
        return true
    }

    /// The lease failed or timed out: true if this ended the wait (the caller gets `error`).
    @discardableResult
    func fail(_ error: Error) -> Bool {
        let waiter: CheckedContinuation<PostgresConnection, Error>?? = lock.withLock {
            switch state {
            case .waiting(let c): state = .failed(error); return .some(c)
            default: return .none
            }
        }
        guard let waiter else { return false }
        waiter?.resume(throwing: error)
        return true
    }

    func waitForRelease() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if releasedEarly { return true }
                releaseWaiter = c
                return false
            }
            if now { c.resume() }
        }
    }

    func release() {
        let waiter: CheckedContinuation<Void, Never>? = lock.withLock {
            state = .released
            if let w = releaseWaiter { releaseWaiter = nil; return w }
            releasedEarly = true
            return nil
        }
        waiter?.resume()
    }
}
