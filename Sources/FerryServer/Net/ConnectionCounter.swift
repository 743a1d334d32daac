import Synchronization

/// The connections open now, against `ConnectionLimits.maxConnections`. Shared by every event
/// loop of the server, hence atomic.
final class ConnectionCounter: Sendable {
    let limit: Int
    private let open = Atomic<Int>(0)

    init(limit: Int) { self.limit = limit }

    var count: Int { open.load(ordering: .relaxed) }

    /// Counts a new connection if there is room for it; false (and nothing counted) if not.
    func tryOpen() -> Bool {
        let now = open.wrappingAdd(1, ordering: .relaxed).newValue
        if now <= limit { return true }
        open.wrappingSubtract(1, ordering: .relaxed)
        return false
    }

    func close() { open.wrappingSubtract(1, ordering: .relaxed) }

    /// True at most once a second: a flood of refused connections is logged, not echoed.
    func shouldLogRefusal() -> Bool {
        let now = Self.epoch.duration(to: .now).components.seconds
        let last = lastRefusalLog.load(ordering: .relaxed)
        return now != last && lastRefusalLog.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
    }

    private let lastRefusalLog = Atomic<Int64>(Int64.min)
    private static let epoch = ContinuousClock.now
}
