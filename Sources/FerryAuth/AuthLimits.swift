import Foundation

/// How much authentication one client may ask for, and how much password hashing the server
/// does at once (docs/server-config.md, "Authentication limits"). The defaults suit a public
/// server and the test suites, which sign up hundreds of users from loopback in a burst.
public struct AuthLimits: Sendable, Equatable {
    /// Threads that hash and verify passwords. scrypt takes a few hundred milliseconds and 128
    /// MiB a time (`PasswordHasher.Parameters.standard`), so they are few and dedicated: the
    /// server's own tasks never wait behind them, and hashing never holds more than
    /// `hashingThreads` × 128 MiB.
    public var hashingThreads: Int
    /// Hashes that may wait for a thread; beyond, requests are refused (503) at once rather than
    /// piling up.
    public var maxQueuedHashes: Int

    /// Failed password logins an account may have before each further attempt waits.
    public var accountFreeFailures: Int
    /// The same for a client address (higher: many people may share one address).
    public var addressFreeFailures: Int
    /// The wait after the last free failure; it doubles with every further failure...
    public var firstDelay: TimeInterval
    /// ...up to this.
    public var maxDelay: TimeInterval
    /// Failures are forgotten this long after the last one (a successful login also clears
    /// its account's, but not its address's).
    public var forgetFailuresAfter: TimeInterval

    /// Password logins that may wait for their turn at once (`LoginThrottle`: past the free
    /// budget attempts of one account or address run one at a time), all together and for one
    /// account or address; beyond, an attempt is refused (429) at once.
    public var maxWaitingLogins = 1000
    public var maxWaitingLoginsPerKey = 64

    /// Sign-ups (anonymous users and email registrations) per address: a bucket of `signupBurst`
    /// that refills at `signupsPerMinute`.
    public var signupsPerMinute: Double
    public var signupBurst: Int

    /// Whether the per-address limits apply to loopback clients. Off by default: local tools and
    /// test suites connect from loopback, and behind a reverse proxy on the same host every
    /// client looks like loopback, so limiting it would limit everyone at once. The per-account
    /// limits apply to every address.
    public var limitLoopback: Bool
    /// Accounts and addresses tracked at most; beyond, the entries idle longest are forgotten,
    /// so a flood of made-up emails cannot grow the server without bound.
    public var maxTrackedKeys: Int

    public init(hashingThreads: Int = AuthLimits.defaultHashingThreads, maxQueuedHashes: Int = 128,
                accountFreeFailures: Int = 5, addressFreeFailures: Int = 20, firstDelay: TimeInterval = 1, maxDelay: TimeInterval = 300,
                forgetFailuresAfter: TimeInterval = 15 * 60, signupsPerMinute: Double = 60, signupBurst: Int = 120,
                limitLoopback: Bool = false, maxTrackedKeys: Int = 100_000) {
        self.hashingThreads = hashingThreads
        self.maxQueuedHashes = maxQueuedHashes
        self.accountFreeFailures = accountFreeFailures
        self.addressFreeFailures = addressFreeFailures
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
        self.forgetFailuresAfter = forgetFailuresAfter
        self.signupsPerMinute = signupsPerMinute
        self.signupBurst = signupBurst
        self.limitLoopback = limitLoopback
        self.maxTrackedKeys = maxTrackedKeys
    }

    /// Half the cores, at least 1 and at most 4: the other half stays free for sync.
    public static var defaultHashingThreads: Int { max(1, min(4, ProcessInfo.processInfo.activeProcessorCount / 2)) }
}
