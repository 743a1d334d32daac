import FerryCore

/// What each user's sync connections take of the server, counted across all of them on this
/// node (docs/server-config.md, "Per-user limits"): connections open, bytes of messages read
/// per second, subscription sets (QUERY) per minute. So that one user's devices, or one
/// account's stolen token, cannot crowd out the others: a connection beyond the limit is
/// refused with ERROR 243 (the device retries later); past the byte rate the server stops
/// reading that user's sockets for as long as the excess costs, which slows the devices down
/// through TCP without losing anything; past the set rate a QUERY waits its turn. (Sessions
/// per connection are bounded where sessions are bound, by the hub.)
///
/// A user's account lives while the user has a connection open or still owes the buckets
/// (so reconnecting does not reset them); accounts of users gone and paid up are dropped.
final class UserQuotas: Sendable {
    private struct Account {
        var connections = 0
        var inbound: TokenBucket
        var sets: TokenBucket
    }

    let limits: SyncLimits
    private let clock: @Sendable () -> Double
    private let accounts = LockedValue<[String: Account]>([:])
    private let opensSinceSweep = LockedValue(0)

    /// `clock` gives seconds from any fixed start; tests pass their own.
    init(limits: SyncLimits, clock: @escaping @Sendable () -> Double = UserQuotas.monotonicSeconds) {
        self.limits = limits
        self.clock = clock
    }

    /// Counts a new connection of `userId`; false (nothing counted) when the user already has
    /// `maxConnectionsPerUser` open.
    func openConnection(_ userId: String) -> Bool {
        let now = clock()
        if opensSinceSweep.withLock({ n in n += 1; return n % 1024 == 0 }) { sweep(now) }
        return accounts.withLock { all in
            var a = all[userId] ?? newAccount(now)
            guard a.connections < limits.maxConnectionsPerUser else { return false }
            a.connections += 1
            all[userId] = a
            return true
        }
    }

    func closeConnection(_ userId: String) {
        let now = clock()
        accounts.withLock { all in
            guard var a = all[userId] else { return }
            a.connections -= 1
            if a.connections <= 0 && a.inbound.isFull(now: now) && a.sets.isFull(now: now) { all[userId] = nil } else { all[userId] = a }
        }
    }

    /// Takes `bytes` just read for `userId`: how long to stop reading that connection (0: go on).
    func takeInbound(_ bytes: Int, userId: String) -> Duration {
        take(userId) { a, now in a.inbound.take(Double(bytes), now: now) }
    }

    /// Takes one subscription set for `userId`: how long its QUERY must wait (0: none).
    func takeSubscriptionSet(userId: String) -> Duration {
        take(userId) { a, now in a.sets.take(1, now: now) }
    }

    /// Connections `userId` has open (tests).
    func connections(of userId: String) -> Int { accounts.withLock { $0[userId]?.connections ?? 0 } }

    private func take(_ userId: String, _ body: (inout Account, Double) -> Double) -> Duration {
        let now = clock()
        let wait = accounts.withLock { all -> Double in
            var a = all[userId] ?? newAccount(now)
            defer { all[userId] = a }
            return body(&a, now)
        }
        return wait > 0 ? .milliseconds(Int64((wait * 1000).rounded(.up))) : .zero
    }

    private func newAccount(_ now: Double) -> Account {
        let rate = Double(limits.inboundBytesPerSecondPerUser)
        let perMinute = Double(limits.subscriptionSetsPerMinutePerUser)
        return Account(inbound: TokenBucket(capacity: rate, perSecond: rate, now: now),
                       sets: TokenBucket(capacity: perMinute, perSecond: perMinute / 60, now: now))
    }

    /// Drops the accounts of users with no connection whose buckets are full again.
    private func sweep(_ now: Double) {
        accounts.withLock { all in
            for (id, var a) in all where a.connections <= 0 && a.inbound.isFull(now: now) && a.sets.isFull(now: now) { all[id] = nil }
        }
    }

    @Sendable static func monotonicSeconds() -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18
    }

    private static let start = ContinuousClock.now
}
