/// How the server gets a commit to each bound session, as decisions on a session's delivery
/// state (issue 25: the hub reads the facts, asks here, and does what it is told;
/// `DeliveryRulesTests`). A session's downloads never skip a version: it has everything in its
/// view through `delivered`, and the next download covers the history after it.
///
/// Three ways exist: from memory, as a commit is fanned out (only to a session exactly at the
/// version before it, idle, whose client reads what it is sent); by following the chain of this
/// node's commits (`SessionRegistry`); and from storage, by a catch-up.
public enum DeliveryRules {
    /// What the hub knows of one session when it delivers.
    public struct Session: Sendable, Equatable {
        /// A QUERY has been processed: nothing syncs before (F-REQSUB).
        public var hasQuery: Bool
        /// A task is sending to it from storage (a QUERY's evaluation, a catch-up, an answer).
        public var busy: Bool
        /// The server version through which it has everything in its view.
        public var delivered: UInt64
        /// The newest commit it was owed but not sent (0: none).
        public var lastSkipped: UInt64
        public init(hasQuery: Bool, busy: Bool, delivered: UInt64, lastSkipped: UInt64 = 0) {
            self.hasQuery = hasQuery
            self.busy = busy
            self.delivered = delivered
            self.lastSkipped = lastSkipped
        }
    }

    public enum FanOut: Sendable, Equatable {
        /// Nothing for it yet (no QUERY processed).
        case ignore
        /// Sent from memory with the commit; its `delivered` becomes the commit's version.
        case send
        /// Owed: recorded as skipped. `idle`: no task is sending to it, so the hub decides
        /// after the fan-out how it catches up (`afterSkip`).
        case skip(idle: Bool)
    }

    /// A commit from `before` to a later version concerns `s`. `queuedBytes`: what its client
    /// has not read yet (read only when it matters: it takes the connection's lock);
    /// `windowBytes`: how much of that it may leave unread before it is caught up from storage
    /// instead (a device that does not read costs the window, not everything it is owed).
    public static func fanOut(_ s: Session, before: UInt64, queuedBytes: @autoclosure () -> Int, windowBytes: Int) -> FanOut {
        guard s.hasQuery else { return .ignore }
        guard !s.busy, s.delivered == before, queuedBytes() <= windowBytes else { return .skip(idle: !s.busy) }
        return .send
    }

    public enum AfterSkip: Sendable, Equatable {
        /// Its own upload awaits its answer, or a task took it meanwhile: that catches it up.
        case leave
        /// Not behind (a catch-up read past the chain): it follows the chain once it reaches it.
        case followChain
        /// Behind: caught up from storage now.
        case catchUp
    }

    /// An idle session the fan-out skipped: how it gets what it is owed.
    public static func afterSkip(_ s: Session, uploading: Bool) -> AfterSkip {
        guard !uploading, !s.busy else { return .leave }
        return s.lastSkipped <= s.delivered ? .followChain : .catchUp
    }

    /// Whether a session follows the chain of this node's commits fanned out from memory
    /// (`chainStart`, `chainHead`]: it does when it is idle with a query, owes nothing it was
    /// skipped for, and has every commit up to the chain's start, since every commit after that
    /// was fanned out here and none that concerned it was missed. A follower's `delivered` is
    /// the chain's head, whatever is stored, until it leaves the chain.
    public static func followsChain(_ s: Session, chainStart: UInt64, chainHead: UInt64) -> Bool {
        s.hasQuery && !s.busy && s.lastSkipped <= s.delivered && s.delivered >= chainStart && s.delivered <= chainHead
    }

    /// Whether a session must be caught up from storage now: it has a query, no task sends to
    /// it, and it lacks commits through `head`.
    public static func needsCatchUp(_ s: Session, head: UInt64) -> Bool {
        s.hasQuery && !s.busy && s.delivered < head
    }

    /// Whether an uploader's answer can be built from the commit in memory: the session is
    /// exactly at the version before the commit (or, before its first QUERY, at most there:
    /// it has nothing in its view to miss). Otherwise the answer is read from storage.
    public static func answersFromMemory(_ s: Session, before: UInt64) -> Bool {
        s.delivered == before || !s.hasQuery && s.delivered <= before
    }
}
