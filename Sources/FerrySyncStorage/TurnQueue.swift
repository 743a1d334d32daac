import FerryCore

/// Turns handed out first come, first served, at most `count` at once; the rest wait in order.
/// The stores use it twice:
/// - writers take turns (a queue of one): SQLite has one writer, and a write transaction stays
///   open across the awaits of its body, so writers queue here instead of holding a
///   thread-blocking lock across a suspension point; on PostgreSQL, a writer waiting on the
///   app's write lock would hold a pooled connection, and a burst of uploads could fill the pool
///   with waiters and starve every read;
/// - snapshots: each is a connection of its own, and a streamed bootstrap keeps it while its
///   client reads. SQLite: descriptors for the file and its WAL, and a page cache (10,000
///   devices subscribing at once ran the process out of descriptors: the load tool's idle run
///   refused 85 devices with 503). PostgreSQL: a connection of the pool, and the hub stores the
///   new set through another one while the snapshot is open, so snapshots may take only half
///   the pool (with all of it, 1,000 devices subscribing at once waited on each other until the
///   pool's 5 s deadline, and logins failed with 500).
public final class TurnQueue: @unchecked Sendable {
    private let lock = ThreadLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(_ count: Int = 1) { free = max(1, count) }

    /// Runs `body` holding a turn.
    public func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiting.isEmpty {
                free += 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}
