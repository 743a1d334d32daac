import FerryCore
import FerryTestSupport
import Foundation

/// A one-shot signal: a pool thread opens it, a test awaits it (or a pool thread blocks on
/// it), so tests wait on events instead of sleeping.
final class Gate: @unchecked Sendable {
    private let lock = ThreadLock()
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private let semaphore = DispatchSemaphore(value: 0)

    func open() {
        let resumed: [CheckedContinuation<Void, Never>] = lock.withLock {
            guard !isOpen else { return [] }
            isOpen = true
            defer { waiters = [] }
            return waiters
        }
        resumed.forEach { $0.resume() }
        semaphore.signal()
    }

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if isOpen { return true }
                waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// For a dedicated thread (a hashing-pool job), never for a task.
    func waitBlocking() {
        semaphore.wait()
        semaphore.signal()
    }
}
