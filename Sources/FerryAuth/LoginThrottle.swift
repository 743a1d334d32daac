import Foundation

/// Slows password guessing: per account (the normalized email) and per client address, a few
/// failed logins are free, then every further attempt waits, twice as long after each failure
/// (`AuthLimits`). A waiting attempt is refused at once (`AuthError.tooManyFailedLogins`, HTTP
/// 429 with `Retry-After`) without a password hash, and is not itself counted as a failure.
///
/// Attempts in flight count against the free budget, so firing many at once gets no more
/// guesses than firing them one by one; past the budget, one attempt at a time is let through.
/// The key is the email whether or not it is registered, so the answers do not tell which
/// accounts exist.
final class LoginThrottle: @unchecked Sendable {
    /// An admitted attempt; `finish` it exactly once.
    struct Attempt {
        fileprivate let account: String
        fileprivate let address: String?
    }

    enum Outcome { case succeeded, failed, undecided }

    private struct Entry {
        var failures = 0
        var lastFailure = Date.distantPast
        var blockedUntil = Date.distantPast
        var inFlight = 0
    }

    private let limits: AuthLimits
    private let lock = NSLock()
    private var accounts: [String: Entry] = [:]
    private var addresses: [String: Entry] = [:]

    init(limits: AuthLimits) { self.limits = limits }

    /// Admits a login attempt or throws `tooManyFailedLogins`.
    func begin(account: String, address: ClientAddress?, now: Date) throws -> Attempt {
        let addressKey = address.flatMap { $0.isLoopback && !limits.limitLoopback ? nil : $0.key }
        return try lock.withLock {
            var wait = self.wait(accounts[account], free: limits.accountFreeFailures, now: now)
            if let addressKey { wait = max(wait, self.wait(addresses[addressKey], free: limits.addressFreeFailures, now: now)) }
            if wait > 0 { throw AuthError.tooManyFailedLogins(retryAfter: max(1, Int(wait.rounded(.up)))) }
            Self.start(&accounts, account, now: now, limits: limits)
            if let addressKey { Self.start(&addresses, addressKey, now: now, limits: limits) }
            return Attempt(account: account, address: addressKey)
        }
    }

    func finish(_ attempt: Attempt, _ outcome: Outcome, now: Date) {
        lock.withLock {
            Self.finish(&accounts, attempt.account, outcome, free: limits.accountFreeFailures, clears: true, now: now, limits: limits)
            if let address = attempt.address {
                Self.finish(&addresses, address, outcome, free: limits.addressFreeFailures, clears: false, now: now, limits: limits)
            }
        }
    }

    /// Seconds the next attempt must wait (0: it may go now).
    private func wait(_ entry: Entry?, free: Int, now: Date) -> TimeInterval {
        guard let entry, !Self.forgotten(entry, now: now, limits: limits) else { return 0 }
        if now < entry.blockedUntil { return entry.blockedUntil.timeIntervalSince(now) }
        // Past the free budget, one attempt at a time; one in flight answers soon.
        if entry.failures + entry.inFlight >= free && entry.inFlight > 0 { return 1 }
        return 0
    }

    private static func forgotten(_ e: Entry, now: Date, limits: AuthLimits) -> Bool {
        e.inFlight == 0 && now >= e.blockedUntil && now.timeIntervalSince(e.lastFailure) >= limits.forgetFailuresAfter
    }

    private static func start(_ map: inout [String: Entry], _ key: String, now: Date, limits: AuthLimits) {
        if map[key] == nil && map.count >= limits.maxTrackedKeys { prune(&map, now: now, limits: limits) }
        var entry = map[key].flatMap { forgotten($0, now: now, limits: limits) ? nil : $0 } ?? Entry()
        entry.inFlight += 1
        map[key] = entry
    }

    private static func finish(_ map: inout [String: Entry], _ key: String, _ outcome: Outcome, free: Int, clears: Bool,
                               now: Date, limits: AuthLimits) {
        guard var entry = map[key] else { return }
        entry.inFlight -= 1
        switch outcome {
        case .failed:
            entry.failures += 1
            entry.lastFailure = now
            if entry.failures >= free {
                let doublings = Double(min(entry.failures - free, 62))
                entry.blockedUntil = now.addingTimeInterval(min(limits.maxDelay, limits.firstDelay * pow(2, doublings)))
            }
        case .succeeded where clears:
            entry.failures = 0
            entry.blockedUntil = .distantPast
        case .succeeded, .undecided: break
        }
        map[key] = entry.inFlight == 0 && entry.failures == 0 ? nil : entry
    }

    /// Forgets what has expired, then, if still full, the tenth idle longest.
    private static func prune(_ map: inout [String: Entry], now: Date, limits: AuthLimits) {
        map = map.filter { !forgotten($0.value, now: now, limits: limits) }
        guard map.count >= limits.maxTrackedKeys else { return }
        let oldest = map.filter { $0.value.inFlight == 0 }.sorted { $0.value.lastFailure < $1.value.lastFailure }
        for (key, _) in oldest.prefix(max(1, map.count / 10)) { map[key] = nil }
    }
}
