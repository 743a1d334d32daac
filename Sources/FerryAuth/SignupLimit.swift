import FerryCore
import Foundation

/// Bounds how many users one client address can create (anonymous logins and email
/// registrations): a token bucket of `AuthLimits.signupBurst` sign-ups that refills at
/// `signupsPerMinute`. Each sign-up costs a row in the user store (and a registration a
/// password hash), so an unbounded loop from one address would grow the store for ever.
final class SignupLimit: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Date
    }

    private let limits: AuthLimits
    /// Only addresses whose bucket is not full: a full bucket is the same as no entry.
    private let tracked = LockedValue<[String: Bucket]>([:])

    init(limits: AuthLimits) { self.limits = limits }

    private var perSecond: Double { max(limits.signupsPerMinute, 0.001) / 60 }

    /// Takes one sign-up from the address's budget or throws `tooManySignups`.
    func take(_ address: ClientAddress?, now: Date) throws {
        guard let address, !address.isLoopback || limits.limitLoopback else { return }
        try tracked.withLock { buckets in
            if buckets[address.key] == nil && buckets.count >= limits.maxTrackedKeys { prune(&buckets, now: now) }
            var bucket = refilled(buckets[address.key], now: now)
            guard bucket.tokens >= 1 else {
                throw AuthError.tooManySignups(retryAfter: max(1, Int(((1 - bucket.tokens) / perSecond).rounded(.up))))
            }
            bucket.tokens -= 1
            buckets[address.key] = bucket
        }
    }

    private func refilled(_ bucket: Bucket?, now: Date) -> Bucket {
        let burst = Double(max(limits.signupBurst, 0))
        guard let bucket else { return Bucket(tokens: burst, updated: now) }
        let elapsed = max(0, now.timeIntervalSince(bucket.updated))
        return Bucket(tokens: min(burst, bucket.tokens + elapsed * perSecond), updated: now)
    }

    /// Drops the buckets that are full again, then, if still too many, the fullest tenth.
    private func prune(_ buckets: inout [String: Bucket], now: Date) {
        let burst = Double(max(limits.signupBurst, 0))
        buckets = buckets.filter { refilled($0.value, now: now).tokens < burst }
        guard buckets.count >= limits.maxTrackedKeys else { return }
        let fullest = buckets.sorted { refilled($0.value, now: now).tokens > refilled($1.value, now: now).tokens }
        for (key, _) in fullest.prefix(max(1, buckets.count / 10)) { buckets[key] = nil }
    }
}
