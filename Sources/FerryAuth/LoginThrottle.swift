import FerryCore
import Foundation

/// Slows password guessing: per account (the normalized email) and per client address, a few
/// failed logins are free, then every further attempt waits, twice as long after each failure
/// (`AuthLimits`). An attempt made while its account or address must wait is refused at once
/// (`AuthError.tooManyFailedLogins`, HTTP 429 with `Retry-After`) without a password hash, and
/// is not itself counted as a failure.
///
/// Parallel attempts get no more guesses than sequential ones, and a burst of correct logins is
/// not refused: attempts run at once only while the failures so far plus the attempts in
/// flight stay within the free budget (past it, one at a time); the others wait their turn in
/// order (`begin` suspends) and are decided when an attempt in flight ends: a success clears its
/// account's failures and lets them through, a failure may block the account, and they are then
/// refused like any attempt made while it is blocked. (Before issue 22 they were refused with
/// 429 at once: ten devices of one account logging in together got five 429s.)
/// At most `AuthLimits.maxWaitingLogins` attempts wait at once, `maxWaitingLoginsPerKey` of
/// them for one account or address; beyond, an attempt is refused with a wait of 1 s.
///
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

    /// An attempt waiting for its turn; resumed (admitted or refused) exactly once, by whoever
    /// removes it from `waiting` under the lock.
    private struct Waiter {
        let id: UInt64
        let attempt: Attempt
        let continuation: CheckedContinuation<Attempt, any Error>
    }

    private enum Admission {
        case admitted
        case refused(AuthError)
        case mustWait
    }

    private let limits: AuthLimits
    private let lock = ThreadLock()
    private var accounts: [String: Entry] = [:]
    private var addresses: [String: Entry] = [:]
    /// In arrival order.
    private var waiting: [Waiter] = []
    private var nextWaiter: UInt64 = 0

    /// Told how many attempts wait after one starts waiting (tests wait on it).
    private let onWaiting: (@Sendable (Int) -> Void)?

    init(limits: AuthLimits, onWaiting: (@Sendable (Int) -> Void)? = nil) {
        self.limits = limits
        self.onWaiting = onWaiting
    }

    /// Admits a login attempt, after the attempts ahead of it if the free budget is in use, or
    /// throws `tooManyFailedLogins` (or `CancellationError` if the task is cancelled while it
    /// waits).
    func begin(account: String, address: ClientAddress?, now: Date) async throws -> Attempt {
        let attempt = Attempt(account: account, address: address.flatMap { $0.isLoopback && !limits.limitLoopback ? nil : $0.key })
        let id: UInt64 = lock.withLock {
            nextWaiter &+= 1
            return nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Attempt, any Error>) in
                var waitingNow: Int?
                let refusal: (any Error)? = lock.withLock {
                    switch admit(attempt, now: now) {
                    case .admitted:
                        continuation.resume(returning: attempt)
                        return nil
                    case .refused(let error): return error
                    case .mustWait:
                        if Task.isCancelled { return CancellationError() }
                        guard waiting.count < limits.maxWaitingLogins,
                              waiting.count(where: { $0.attempt.account == attempt.account }) < limits.maxWaitingLoginsPerKey,
                              attempt.address.map({ key in waiting.count(where: { $0.attempt.address == key }) < limits.maxWaitingLoginsPerKey }) ?? true
                        else { return AuthError.tooManyFailedLogins(retryAfter: 1) }
                        waiting.append(Waiter(id: id, attempt: attempt, continuation: continuation))
                        waitingNow = waiting.count
                        return nil
                    }
                }
                if let refusal { continuation.resume(throwing: refusal) }
                if let waitingNow { onWaiting?(waitingNow) }
            }
        } onCancel: {
            let cancelled: Waiter? = lock.withLock {
                guard let index = waiting.firstIndex(where: { $0.id == id }) else { return nil }
                return waiting.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Ends an admitted attempt with its outcome, and decides the attempts waiting behind it.
    func finish(_ attempt: Attempt, _ outcome: Outcome, now: Date) {
        let decided: [(Waiter, Admission)] = lock.withLock {
            Self.finish(&accounts, attempt.account, outcome, free: limits.accountFreeFailures, clears: true, now: now, limits: limits)
            if let address = attempt.address {
                Self.finish(&addresses, address, outcome, free: limits.addressFreeFailures, clears: false, now: now, limits: limits)
            }
            // In arrival order: the first that fits takes the slot this attempt freed.
            var decided: [(Waiter, Admission)] = []
            var stillWaiting: [Waiter] = []
            for waiter in waiting {
                let admission = admit(waiter.attempt, now: now)
                if case .mustWait = admission { stillWaiting.append(waiter) } else { decided.append((waiter, admission)) }
            }
            waiting = stillWaiting
            return decided
        }
        for (waiter, admission) in decided {
            switch admission {
            case .admitted: waiter.continuation.resume(returning: waiter.attempt)
            case .refused(let error): waiter.continuation.resume(throwing: error)
            case .mustWait: break
            }
        }
    }

    /// Under the lock: admits the attempt (counting it in flight on its account and address),
    /// or says why not.
    private func admit(_ attempt: Attempt, now: Date) -> Admission {
        var wait = blocked(accounts[attempt.account], now: now)
        if let key = attempt.address { wait = max(wait, blocked(addresses[key], now: now)) }
        if wait > 0 { return .refused(AuthError.tooManyFailedLogins(retryAfter: max(1, Int(wait.rounded(.up))))) }
        guard hasRoom(accounts[attempt.account], free: limits.accountFreeFailures, now: now),
              attempt.address.map({ hasRoom(addresses[$0], free: limits.addressFreeFailures, now: now) }) ?? true else { return .mustWait }
        Self.start(&accounts, attempt.account, now: now, limits: limits)
        if let key = attempt.address { Self.start(&addresses, key, now: now, limits: limits) }
        return .admitted
    }

    /// Seconds the key is blocked for after its last failure (0: not blocked).
    private func blocked(_ entry: Entry?, now: Date) -> TimeInterval {
        guard let entry, !Self.forgotten(entry, now: now, limits: limits), now < entry.blockedUntil else { return 0 }
        return entry.blockedUntil.timeIntervalSince(now)
    }

    /// Whether one more attempt may run beside those in flight: while failures and attempts in
    /// flight stay within the free budget, or when none is in flight.
    private func hasRoom(_ entry: Entry?, free: Int, now: Date) -> Bool {
        guard let entry, !Self.forgotten(entry, now: now, limits: limits) else { return true }
        return entry.inFlight == 0 || entry.failures + entry.inFlight < free
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
