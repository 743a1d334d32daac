import FerryCore


/// One connection's share of the `InboundBudget`: what its reader took for messages not yet
/// processed. Everything still held goes back when the connection ends (`releaseAll`), and a
/// release after that is a no-op, so no path can give bytes back twice.
final class HeldInboundBytes: Sendable {
    private let budget: InboundBudget
    private let held = LockedValue(0)

    init(budget: InboundBudget) { self.budget = budget }

    /// The server-wide bound.
    var limit: Int { budget.limit }

    func reserve(_ bytes: Int) -> Bool {
        held.withLock { held in
            guard budget.reserve(bytes) else { return false }
            held += bytes
            return true
        }
    }

    func release(_ bytes: Int) {
        let released = held.withLock { held in
            let r = min(bytes, held)
            held -= r
            return r
        }
        budget.release(released)
    }

    func releaseAll() {
        let released = held.withLock { held in
            defer { held = 0 }
            return held
        }
        budget.release(released)
    }
}
