/// A rate with a burst: `capacity` tokens, refilled at `perSecond`. A take may go into debt:
/// the caller is told how long to wait until the debt is paid, and waits before it takes
/// more. So one large message is never refused, only followed by a pause as long as it costs,
/// and a client that keeps taking keeps waiting longer (`UserQuotas`).
struct TokenBucket: Sendable {
    let capacity: Double
    let perSecond: Double
    private var tokens: Double
    /// Seconds on the quotas' clock when `tokens` was last brought up to date.
    private var updated: Double

    init(capacity: Double, perSecond: Double, now: Double) {
        self.capacity = capacity
        self.perSecond = perSecond
        tokens = capacity
        updated = now
    }

    /// Takes `amount`; the seconds the caller must wait before it takes again (0 if none).
    mutating func take(_ amount: Double, now: Double) -> Double {
        refill(now)
        tokens -= amount
        return tokens >= 0 ? 0 : -tokens / perSecond
    }

    /// Whether the bucket is full again: nothing owed, nothing to remember.
    mutating func isFull(now: Double) -> Bool {
        refill(now)
        return tokens >= capacity
    }

    private mutating func refill(_ now: Double) {
        tokens = min(capacity, tokens + max(0, now - updated) * perSecond)
        updated = now
    }
}
