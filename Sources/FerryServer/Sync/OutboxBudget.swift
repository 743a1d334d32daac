import FerryCore

/// The bytes queued to be sent on every sync connection together, bounded
/// (`ConnectionLimits.maxQueuedBytesTotal`, issue 22, point 9). Each connection is bounded on
/// its own (`ConnectionOutbox`), but nothing bounded their sum: 20 WebSockets that never read
/// while one device wrote grew the server by 191 MB, and 10,000 would have needed 160 GB. Past
/// the total, the connection furthest behind (the most bytes queued) is dropped with ERROR 242,
/// as one that passes its own bound; its device reconnects and resumes from its last version.
/// The total is the `ferry_outbox_queued_bytes` gauge; the drops `ferry_outbox_shed_total`.
final class OutboxBudget: Sendable {
    /// 0: no bound.
    let limit: Int

    private struct Member: Sendable {
        weak var outbox: ConnectionOutbox?
    }
    private struct State: Sendable {
        var total = 0
        var members: [UInt64: Member] = [:]
        var shed = 0
    }
    private let state = LockedValue(State())
    private let metrics: ServerMetrics?

    init(limit: Int, metrics: ServerMetrics? = nil) {
        self.limit = limit
        self.metrics = metrics
    }

    var total: Int { state.withLock { $0.total } }
    /// Connections dropped to keep within the bound, since the start.
    var shed: Int { state.withLock { $0.shed } }

    func join(_ outbox: ConnectionOutbox) { state.withLock { $0.members[outbox.id] = Member(outbox: outbox) } }

    func leave(_ id: UInt64, holding bytes: Int) {
        let total = state.withLock {
            $0.members[id] = nil
            $0.total -= bytes
            return $0.total
        }
        metrics?.outboxQueued(bytes: total)
    }

    /// An outbox's queue grew or shrank by `delta`; past the bound, the outbox furthest behind
    /// is dropped (possibly the one that grew).
    func changed(by delta: Int) {
        guard delta != 0 else { return }
        let (over, total) = state.withLock { s -> (Bool, Int) in
            s.total += delta
            return (delta > 0 && limit > 0 && s.total > limit, s.total)
        }
        metrics?.outboxQueued(bytes: total)
        guard over else { return }
        // The queues are read outside this lock (each outbox has its own): the choice may be a
        // moment stale, which only makes it a near-slowest connection.
        let members = state.withLock { $0.members.values.compactMap(\.outbox) }
        guard let slowest = members.filter({ !$0.isClosed }).max(by: { $0.queuedBytes < $1.queuedBytes }) else { return }
        state.withLock { $0.shed += 1 }
        metrics?.outboxShed()
        slowest.fallBehind(message: "the server's send queues are full (more than \(limit) bytes for every connection together) and this connection was the furthest behind; reconnect to resume")
    }
}
