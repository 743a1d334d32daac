import FerryCore


/// The bytes of client sync messages the whole server holds at once, whether still arriving
/// (a message is collected from its frames before it can be decoded) or decoded and waiting
/// to be processed: bounded by `ConnectionLimits.maxInboundBytes`, so clients that each park a
/// large message halfway cannot add up to more memory than that. Each connection takes its
/// share through its `HeldInboundBytes`.
final class InboundBudget: Sendable {
    let limit: Int
    private let used = LockedValue(0)

    init(limit: Int) { self.limit = limit }

    var inUse: Int { used.withLock { $0 } }

    /// Takes `bytes` if they fit under the limit; false (and nothing taken) if not.
    func reserve(_ bytes: Int) -> Bool {
        used.withLock { used in
            guard used + bytes <= limit else { return false }
            used += bytes
            return true
        }
    }

    func release(_ bytes: Int) { used.withLock { $0 -= bytes } }
}
