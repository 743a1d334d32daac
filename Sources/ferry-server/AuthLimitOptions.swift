import ArgumentParser
import FerryAuth
import FerryServer

/// The flags of `AuthLimits` (docs/server-config.md, "Authentication limits"); a flag not
/// given keeps the library's default.
struct AuthLimitOptions: ParsableArguments {
    @Option(name: .customLong("hashing-threads"), help: "Threads that hash passwords (default: half the cores, 1 to 4).")
    var hashingThreads: Int?

    @Option(name: .customLong("account-free-failures"), help: "Failed logins of an account before attempts must wait (default 5).")
    var accountFreeFailures: Int?

    @Option(name: .customLong("address-free-failures"), help: "Failed logins from an address before attempts must wait (default 20).")
    var addressFreeFailures: Int?

    @Option(name: .customLong("signups-per-minute"), help: "Sign-ups an address gets per minute, after a burst of twice that (default 60).")
    var signupsPerMinute: Double?

    @Flag(name: .customLong("limit-loopback"), help: "Apply the per-address limits to loopback clients too.")
    var limitLoopback = false

    /// Hidden: only the test suites that start this binary use it
    /// (`ServerConfiguration.weakenPasswordHashingForLocalTests`).
    @Flag(name: .customLong("weak-password-hashing-for-tests"), help: .hidden)
    var weakPasswordHashingForTests = false

    @Option(name: .customLong("trusted-proxy"), help: ArgumentHelp(
        "A reverse proxy (address or CIDR network, e.g. 127.0.0.1 or 10.0.0.0/8) whose --client-address-header names the client; repeat for several.",
        discussion: "Requests from other peers are attributed to the peer, whatever their headers say."))
    var trustedProxies: [String] = []

    @Option(name: .customLong("client-address-header"), help: "The header a trusted proxy puts the client's address in (a list like X-Forwarded-For's, or one address like X-Real-IP's).")
    var clientAddressHeader: String = "X-Forwarded-For"

    /// The trusted proxies, if any were given.
    func proxies() throws -> TrustedProxies? {
        guard !trustedProxies.isEmpty else { return nil }
        do { return try TrustedProxies(header: clientAddressHeader, proxies: trustedProxies) } catch let e as ServerStartError {
            throw ValidationError(e.description)
        }
    }

    func validate() throws {
        _ = try proxies()
        for (flag, value) in [("--hashing-threads", hashingThreads), ("--account-free-failures", accountFreeFailures),
                              ("--address-free-failures", addressFreeFailures)] {
            if let value, value < 1 { throw ValidationError("\(flag) must be at least 1") }
        }
        if let signupsPerMinute, !(signupsPerMinute > 0) { throw ValidationError("--signups-per-minute must be positive") }
    }

    var limits: AuthLimits {
        var limits = AuthLimits()
        if let hashingThreads { limits.hashingThreads = hashingThreads }
        if let accountFreeFailures { limits.accountFreeFailures = accountFreeFailures }
        if let addressFreeFailures { limits.addressFreeFailures = addressFreeFailures }
        if let signupsPerMinute {
            limits.signupsPerMinute = signupsPerMinute
            limits.signupBurst = max(1, Int(signupsPerMinute * 2))
        }
        limits.limitLoopback = limitLoopback
        return limits
    }
}
