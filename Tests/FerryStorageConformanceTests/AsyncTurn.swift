import FerryCore
import Foundation

/// A first-come, first-served lock for tasks: waiting suspends the task, never a thread.
final class AsyncTurn: @unchecked Sendable {
    private let lock = ThreadLock()
    private var held = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if held { waiting.append(c); return false }
                held = true
                return true
            }
            if now { c.resume() }
        }
    }

    /// Hands the turn to the next waiter, if any.
    func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiting.isEmpty { held = false; return nil }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}
