/// A trigger's delivery state as the store keeps it (issue 24's triggers, docs/backend.md):
/// where its delivery stands in the app's history, its failures, whether it paused, and
/// which node delivers it now. Kept in the store so that a restart, or another node, resumes
/// where delivery stopped.
public struct TriggerState: Sendable, Equatable {
    public var name: String
    /// Every change up to this server version was delivered (or did not match).
    public var cursor: UInt64
    /// Failed attempts in a row (0 after a delivery).
    public var failures: Int
    /// Stopped after too many failures, until an admin resumes it.
    public var paused: Bool
    /// The last failure, as the webhook's answer or the network said it.
    public var lastError: String?
    /// The node holding the delivery lease, and until when (milliseconds since the epoch).
    public var holder: String?
    public var leaseUntilMilliseconds: Int64
    /// Deliveries made since the trigger was created.
    public var delivered: Int64

    public init(name: String, cursor: UInt64, failures: Int = 0, paused: Bool = false, lastError: String? = nil, holder: String? = nil,
                leaseUntilMilliseconds: Int64 = 0, delivered: Int64 = 0) {
        self.name = name
        self.cursor = cursor
        self.failures = failures
        self.paused = paused
        self.lastError = lastError
        self.holder = holder
        self.leaseUntilMilliseconds = leaseUntilMilliseconds
        self.delivered = delivered
    }
}

/// What a trigger's delivery records, after each attempt.
public struct TriggerProgress: Sendable, Equatable {
    public var cursor: UInt64
    public var failures: Int
    public var paused: Bool
    public var lastError: String?
    /// Deliveries made by this attempt (added to `TriggerState.delivered`).
    public var delivered: Int64
    public init(cursor: UInt64, failures: Int, paused: Bool, lastError: String?, delivered: Int64) {
        self.cursor = cursor
        self.failures = failures
        self.paused = paused
        self.lastError = lastError
        self.delivered = delivered
    }
}

/// Triggers' delivery state, shared by the nodes of a cluster: one node at a time holds a
/// trigger's lease and delivers it; a node that stops renewing loses it when it expires.
public protocol TriggerStorage: AnyObject, Sendable {
    /// Every trigger's state, by name.
    func triggerStates() async throws -> [TriggerState]
    /// Takes (or renews) trigger `name`'s lease for `node` until `untilMilliseconds`, if no
    /// other node holds one that has not expired at `nowMilliseconds`. A trigger without a
    /// row gets one, starting at `cursor`. Returns the state with the lease `node`'s, or nil
    /// when another node holds it.
    func leaseTrigger(_ name: String, node: String, nowMilliseconds: Int64, untilMilliseconds: Int64, cursor: UInt64) async throws -> TriggerState?
    /// Records `progress`, only while `node` holds the lease; false when it no longer does
    /// (another node took over: what this one delivered since will be delivered again).
    func recordTrigger(_ name: String, node: String, _ progress: TriggerProgress) async throws -> Bool
    /// An admin's resume of a paused trigger: not paused, no failures. False when the
    /// trigger has no state yet.
    func resumeTrigger(_ name: String) async throws -> Bool
}
