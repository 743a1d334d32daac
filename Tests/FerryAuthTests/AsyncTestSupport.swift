import FerryCore
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

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out: \(what)" }
}

/// `operation`'s result, or `TimedOut` after `seconds` (generous: it only turns a hang into a
/// failure, it measures nothing). The operation runs in a task of its own, so even one that
/// ignores cancellation cannot hold the test.
func within<T: Sendable>(_ seconds: Double, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let answer = Answer<T>()
    return try await withCheckedThrowingContinuation { continuation in
        answer.set(continuation)
        let work = Task {
            do { answer.give(.success(try await operation())) } catch { answer.give(.failure(error)) }
        }
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            if !Task.isCancelled {
                answer.give(.failure(TimedOut(what: what)))
                work.cancel()
            }
        }
        answer.onGiven { timer.cancel() }
    }
}

/// Resumes a continuation once, with whichever answer comes first.
private final class Answer<T: Sendable>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var given = false
    private var after: (@Sendable () -> Void)?

    func set(_ c: CheckedContinuation<T, any Error>) { lock.withLock { continuation = c } }

    func onGiven(_ f: @escaping @Sendable () -> Void) {
        let now: Bool = lock.withLock {
            if given { return true }
            after = f
            return false
        }
        if now { f() }
    }

    func give(_ result: Result<T, any Error>) {
        let (c, f): (CheckedContinuation<T, any Error>?, (@Sendable () -> Void)?) = lock.withLock {
            guard !given else { return (nil, nil) }
            given = true
            defer { continuation = nil; after = nil }
            return (continuation, after)
        }
        c?.resume(with: result)
        f?()
    }
}
