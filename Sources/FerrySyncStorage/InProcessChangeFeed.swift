import Foundation

/// A change feed for a store only this process writes (the embedded SQLite store): the store
/// publishes after each commit, every subscriber hears it. Only the newest signal matters, so
/// each stream keeps just that one when its consumer falls behind.
public final class InProcessChangeFeed: ChangeFeed, @unchecked Sendable {
    private let lock = NSLock()
    private var latest: FeedSignal
    private var continuations: [UUID: AsyncStream<FeedSignal>.Continuation] = [:]
    private var closed = false

    public init(initial: FeedSignal) { latest = initial }

    public func signals() -> AsyncStream<FeedSignal> {
        let (stream, continuation) = AsyncStream.makeStream(of: FeedSignal.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        lock.lock()
        let current = latest
        if closed { lock.unlock(); continuation.finish(); return stream }
        continuations[id] = continuation
        lock.unlock()
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.lock()
            self.continuations[id] = nil
            self.lock.unlock()
        }
        continuation.yield(current)
        return stream
    }

    /// Called by the store after a commit or a state change (never lowers what was published).
    public func publish(headVersion: UInt64? = nil, stateRevision: UInt64? = nil) {
        lock.lock()
        if let headVersion { latest.headVersion = max(latest.headVersion, headVersion) }
        if let stateRevision { latest.stateRevision = max(latest.stateRevision, stateRevision) }
        let signal = latest
        let targets = Array(continuations.values)
        lock.unlock()
        for c in targets { c.yield(signal) }
    }

    /// Ends every stream.
    public func finish() {
        lock.lock()
        closed = true
        let targets = Array(continuations.values)
        continuations = [:]
        lock.unlock()
        for c in targets { c.finish() }
    }
}
