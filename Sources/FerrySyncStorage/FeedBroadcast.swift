import FerryCore
import Foundation

/// The subscribers of a change feed and what it knows: every `signals()` stream starts with the
/// current state and hears each growth of head or revision. Only the newest signal matters, so
/// each stream keeps just that one when its consumer falls behind. On its own it is the feed of
/// a store only this process writes (the embedded SQLite store publishes after each commit);
/// PostgreSQL's feed publishes into one what its listener and timer read.
public final class FeedBroadcast: ChangeFeed, @unchecked Sendable {
    private let lock = ThreadLock()
    private var latest: FeedSignal
    private var continuations: [UUID: AsyncStream<FeedSignal>.Continuation] = [:]
    private var closed = false

    public init(initial: FeedSignal) { latest = initial }

    public func signals() -> AsyncStream<FeedSignal> {
        let (stream, continuation) = AsyncStream.makeStream(of: FeedSignal.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        let current: FeedSignal? = lock.withLock {
            guard !closed else { return nil }
            continuations[id] = continuation
            return latest
        }
        guard let current else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            guard let self else { return }
            self.lock.withLock { self.continuations[id] = nil }
        }
        continuation.yield(current)
        return stream
    }

    /// Raises what the feed knows (never lowers it) and signals every stream if it grew.
    public func publish(headVersion: UInt64? = nil, stateRevision: UInt64? = nil) {
        let grown: (FeedSignal, [AsyncStream<FeedSignal>.Continuation])? = lock.withLock {
            var next = latest
            if let headVersion { next.headVersion = max(next.headVersion, headVersion) }
            if let stateRevision { next.stateRevision = max(next.stateRevision, stateRevision) }
            guard next != latest, !closed else { return nil }
            latest = next
            return (next, Array(continuations.values))
        }
        guard let (signal, targets) = grown else { return }
        for c in targets { c.yield(signal) }
    }

    /// Ends every stream; later `signals()` streams end at once.
    public func finish() {
        let targets: [AsyncStream<FeedSignal>.Continuation] = lock.withLock {
            closed = true
            defer { continuations = [:] }
            return Array(continuations.values)
        }
        for c in targets { c.finish() }
    }
}
