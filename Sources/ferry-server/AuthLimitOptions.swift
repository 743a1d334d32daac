import ArgumentParser
import FerryAuth

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

    func validate() throws {
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
