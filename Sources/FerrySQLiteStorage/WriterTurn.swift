import Foundation

/// Whose turn it is to write: SQLite has one writer, and a write transaction stays open across
/// the awaits of its body, so writers queue here (first come, first served) instead of holding
/// a thread-blocking lock across a suspension point.
final class WriterTurn: @unchecked Sendable {
    private let lock = NSLock()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if busy { waiting.append(c); return false }
                busy = true
                return true
            }
            if now { c.resume() }
        }
    }

    /// Hands the turn to the next writer in line, or frees it.
    func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiting.isEmpty { busy = false; return nil }
            return waiting.removeFirst()
        }
        next?.resume()
    }

    func run<T>(_ body: () async throws -> T) async rethrows -> T {
        await acquire()
        defer { release() }
        return try await body()
    }
}
