import FerryCore
import Foundation

// Deadlines for tests, shared by the test targets instead of copied: `within` turns a hang into
// a failure; `poll` waits for a state nothing signals (a file a child writes, a log line
// another node records a moment later), checking at an interval, for at most a deadline.
// Where an event exists, tests wait on it instead.

public struct TimedOut: Error, CustomStringConvertible {
    public let what: String
    public init(what: String) { self.what = what }
    public var description: String { "timed out: \(what)" }
}

/// `operation`'s result, or `TimedOut` after `seconds` (generous: it only turns a hang into a
/// failure, it measures nothing). The operation runs in a task of its own, so even one that
/// ignores cancellation cannot hold the test.
public func within<T: Sendable>(_ seconds: Double, _ what: String, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
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

/// Checks `condition` every `interval` until it holds (true) or `seconds` pass (false, after one
/// last check). For states that nothing signals; a test that has an event waits on it instead.
@discardableResult
public func poll(seconds: Double, every interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        do { try await Task.sleep(for: interval) } catch { break }
    }
    return try await condition()
}
