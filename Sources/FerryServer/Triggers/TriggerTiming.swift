/// The times of triggers' delivery (docs/backend.md, "Triggers").
public struct TriggerTiming: Sendable {
    /// How long a node's hold on a trigger lasts without renewal: after it, another node takes
    /// the trigger over (a node that died stops delivering for at most this long).
    public var lease: Duration = .seconds(30)
    /// How often the holder renews its lease, and how often a node that does not hold a
    /// trigger (or holds a paused one) looks again.
    public var renew: Duration = .seconds(10)
    /// The wait after a first failure; it doubles with each failure in a row, up to `maxRetry`.
    public var retry: Duration = .seconds(1)
    public var maxRetry: Duration = .seconds(300)
    /// How long a webhook may take to answer.
    public var requestTimeout: Duration = .seconds(10)
    public init() {}
}
