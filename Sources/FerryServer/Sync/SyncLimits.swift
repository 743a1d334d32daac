/// What one user's messages may cost the server (docs/server-config.md, "Sync limits"): every
/// bound here keeps one device's subscription set or churn of client files from slowing,
/// starving or filling the server for the others. The query language's own limits (length,
/// terms, nesting of one query) are FerryCore's `QueryLimits`.
public struct SyncLimits: Sendable, Equatable {
    /// Subscriptions in one subscription set (QUERY).
    public var maxSubscriptionsPerSet: Int
    /// Bytes of query text in one subscription set, all subscriptions together.
    public var maxQueryBytesPerSet: Int
    /// Comparison terms in one subscription set, all queries together: the view costs about
    /// this many evaluations per stored object.
    public var maxTermsPerSet: Int
    /// How long the evaluation of one subscription set's view may run (it runs beside the hub,
    /// so it never holds up other users' uploads); past it the set is rejected (error 226).
    public var viewEvaluationSeconds: Double
    /// Client files (device databases) kept per user: a new one beyond this forgets the user's
    /// least recently seen file (that device resets when it comes back).
    public var maxClientFilesPerUser: Int

    public init(maxSubscriptionsPerSet: Int = 1_000, maxQueryBytesPerSet: Int = 256 << 10, maxTermsPerSet: Int = 10_000,
                viewEvaluationSeconds: Double = 60, maxClientFilesPerUser: Int = 1_000) {
        self.maxSubscriptionsPerSet = maxSubscriptionsPerSet
        self.maxQueryBytesPerSet = maxQueryBytesPerSet
        self.maxTermsPerSet = maxTermsPerSet
        self.viewEvaluationSeconds = viewEvaluationSeconds
        self.maxClientFilesPerUser = maxClientFilesPerUser
    }
}
