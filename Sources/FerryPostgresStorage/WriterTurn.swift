import Foundation

/// This node's writers take turns before they lease a connection. The database lock alone
/// would be correct, but each writer waiting on it would hold a pooled connection: a burst of
/// uploads could fill the pool with waiters and starve every read. With the turn, at most one
/// connection per node waits on the app's write lock. First come, first served.
final class WriterTurn: @unchecked Sendable {
    private let lock = NSLock()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func run<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if busy { waiters.append(c); return false }
                busy = true
                return true
            }
            if now { c.resume() }
        }
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiters.isEmpty { busy = false; return nil }
            return waiters.removeFirst()
        }
        next?.resume()
    }
}
