import FerryCore
import FerryAuth
import Foundation
import Hummingbird

/// The admin API's credential: the `FERRY_ADMIN_TOKEN` secret as a Bearer token. Without the
/// secret every admin call (and `/metrics` behind the token) is refused with 403.
///
/// The token must have at least 32 bytes, or the server does not start (issue 22: a token of
/// one letter turned the admin API on). Wrong tokens are throttled per client address
/// (`AdminFailureThrottle`), loopback included: the admin listener is on loopback by default,
/// so exempting it would exempt everyone.
final class AdminToken: Sendable {
    /// The shortest token accepted: as long as the access-token secret must be, far beyond guessing.
    static let minimumBytes = 32

    let token: String?
    private let failures: AdminFailureThrottle

    init(token: String?, failures: AdminFailureThrottle = AdminFailureThrottle()) throws {
        if let token, token.utf8.count < Self.minimumBytes {
            throw ServerStartError("FERRY_ADMIN_TOKEN must have at least \(Self.minimumBytes) bytes, it has \(token.utf8.count): "
                + "a short token can be guessed (make one with `openssl rand -hex 32`); unset it to disable the admin API")
        }
        self.token = token
        self.failures = failures
    }

    func authorize(_ request: Request, _ context: ServerRequestContext) throws {
        try authorize(request, from: context.clientAddress)
    }

    /// Refuses with 403 (no token configured), 401 (no or a wrong token) or 429 (too many wrong
    /// tokens from this address lately: refused without looking at the token, the right one too).
    func authorize(_ request: Request, from address: ClientAddress?) throws {
        guard let token else { throw APIError(status: .forbidden, code: "AdminDisabled", message: "the admin API is disabled: set FERRY_ADMIN_TOKEN to enable it") }
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the admin API needs an Authorization: Bearer header")
        }
        // In-process callers (router tests) have no address: they share one key.
        let key = address?.key ?? "in-process"
        try failures.check(key)
        // Constant-time comparison: the token must not leak through timing.
        let given = Array(header.dropFirst(7).utf8), expected = Array(token.utf8)
        var diff = UInt8(given.count == expected.count ? 0 : 1)
        for i in 0..<min(given.count, expected.count) { diff |= given[i] ^ expected[i] }
        guard diff == 0 else {
            failures.failed(key)
            throw APIError(status: .unauthorized, code: "InvalidSession", message: "invalid admin token")
        }
        failures.succeeded(key)
    }
}

/// Wrong admin tokens per client address: the first `freeFailures` cost nothing, then each
/// further attempt must wait `firstDelay`, doubling after every failure up to `maxDelay`; an
/// attempt made too early is refused with 429 and `Retry-After`. A right token clears the
/// address's failures; they are also forgotten `forgetAfter` after the last one. At most
/// `maxTracked` addresses are remembered (the oldest failures go first).
final class AdminFailureThrottle: Sendable {
    struct Limits: Sendable {
        var freeFailures = 10
        var firstDelay: TimeInterval = 1
        var maxDelay: TimeInterval = 300
        var forgetAfter: TimeInterval = 15 * 60
        var maxTracked = 10_000
    }

    private struct Entry {
        var failures = 0
        var last = Date.distantPast
        var blockedUntil = Date.distantPast
    }

    private let limits: Limits
    private let now: @Sendable () -> Date
    private let tracked = LockedValue<[String: Entry]>([:])

    init(limits: Limits = Limits(), now: @escaping @Sendable () -> Date = { Date() }) {
        self.limits = limits
        self.now = now
    }

    func check(_ key: String) throws {
        let t = now()
        let wait: TimeInterval = tracked.withLock { entries in
            guard let entry = entries[key], t < entry.blockedUntil else { return 0 }
            return entry.blockedUntil.timeIntervalSince(t)
        }
        guard wait > 0 else { return }
        let seconds = max(1, Int(wait.rounded(.up)))
        var error = APIError(status: .tooManyRequests, code: "TooManyRequests",
                             message: "too many wrong admin tokens from this address: try again in \(seconds) s")
        error.retryAfter = seconds
        throw error
    }

    func failed(_ key: String) {
        let t = now()
        let limits = self.limits
        tracked.withLock { entries in
            if entries[key] == nil && entries.count >= limits.maxTracked {
                entries = entries.filter { t.timeIntervalSince($0.value.last) < limits.forgetAfter || t < $0.value.blockedUntil }
                if entries.count >= limits.maxTracked {
                    for (old, _) in entries.sorted(by: { $0.value.last < $1.value.last }).prefix(max(1, entries.count / 10)) { entries[old] = nil }
                }
            }
            var entry = entries[key].flatMap { t.timeIntervalSince($0.last) >= limits.forgetAfter && t >= $0.blockedUntil ? nil : $0 } ?? Entry()
            entry.failures += 1
            entry.last = t
            if entry.failures >= limits.freeFailures {
                let doublings = Double(min(entry.failures - limits.freeFailures, 62))
                entry.blockedUntil = t.addingTimeInterval(min(limits.maxDelay, limits.firstDelay * pow(2, doublings)))
            }
            entries[key] = entry
        }
    }

    func succeeded(_ key: String) {
        tracked.withLock { _ = $0.removeValue(forKey: key) }
    }
}
