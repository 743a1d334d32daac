import ArgumentParser
import FerryServer

/// The flags of `SyncLimits` (docs/server-config.md, "Sync limits"); a flag not given keeps
/// the library's default.
struct SyncLimitOptions: ParsableArguments {
    @Option(name: .customLong("max-subscriptions-per-set"), help: "Subscriptions in one subscription set at most (default 1000).")
    var maxSubscriptionsPerSet: Int?

    @Option(name: .customLong("max-query-bytes-per-set"), help: "Bytes of query text in one subscription set at most (default 262144).")
    var maxQueryBytesPerSet: Int?

    @Option(name: .customLong("max-terms-per-set"), help: "Comparison terms in one subscription set at most (default 10000).")
    var maxTermsPerSet: Int?

    @Option(name: .customLong("view-evaluation-seconds"), help: "Seconds one subscription set's view may take to evaluate (default 60).")
    var viewEvaluationSeconds: Double?

    @Option(name: .customLong("max-client-files-per-user"), help: "Client files (device databases) kept per user (default 1000).")
    var maxClientFilesPerUser: Int?

    @Option(name: .customLong("max-connections-per-user"), help: "Sync connections one user may have open at once (default 100).")
    var maxConnectionsPerUser: Int?

    @Option(name: .customLong("max-sessions-per-connection"), help: "Sessions (synced databases) bound on one sync connection at most (default 1000).")
    var maxSessionsPerConnection: Int?

    @Option(name: .customLong("subscription-sets-per-minute"), help: "Subscription sets (QUERY) one user may send a minute, with a burst of as many (default 600).")
    var subscriptionSetsPerMinute: Int?

    @Option(name: .customLong("inbound-bytes-per-second"), help: "Bytes of sync messages read from one user's connections a second, with a burst of as many (default 64 MiB).")
    var inboundBytesPerSecond: Int?

    func validate() throws {
        for (flag, value) in [("--max-subscriptions-per-set", maxSubscriptionsPerSet), ("--max-query-bytes-per-set", maxQueryBytesPerSet),
                              ("--max-terms-per-set", maxTermsPerSet), ("--max-client-files-per-user", maxClientFilesPerUser),
                              ("--max-connections-per-user", maxConnectionsPerUser), ("--max-sessions-per-connection", maxSessionsPerConnection),
                              ("--subscription-sets-per-minute", subscriptionSetsPerMinute), ("--inbound-bytes-per-second", inboundBytesPerSecond)] {
            if let value, value < 1 { throw ValidationError("\(flag) must be at least 1") }
        }
        if let viewEvaluationSeconds, !(viewEvaluationSeconds > 0) {
            throw ValidationError("--view-evaluation-seconds must be a positive number of seconds")
        }
    }

    var limits: SyncLimits {
        var limits = SyncLimits()
        if let maxSubscriptionsPerSet { limits.maxSubscriptionsPerSet = maxSubscriptionsPerSet }
        if let maxQueryBytesPerSet { limits.maxQueryBytesPerSet = maxQueryBytesPerSet }
        if let maxTermsPerSet { limits.maxTermsPerSet = maxTermsPerSet }
        if let viewEvaluationSeconds { limits.viewEvaluationSeconds = viewEvaluationSeconds }
        if let maxClientFilesPerUser { limits.maxClientFilesPerUser = maxClientFilesPerUser }
        if let maxConnectionsPerUser { limits.maxConnectionsPerUser = maxConnectionsPerUser }
        if let maxSessionsPerConnection { limits.maxSessionsPerConnection = maxSessionsPerConnection }
        if let subscriptionSetsPerMinute { limits.subscriptionSetsPerMinutePerUser = subscriptionSetsPerMinute }
        if let inboundBytesPerSecond { limits.inboundBytesPerSecondPerUser = inboundBytesPerSecond }
        return limits
    }
}
