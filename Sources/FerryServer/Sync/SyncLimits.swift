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
    /// Sync connections (WebSockets) one user may have open on a node; one more is refused
    /// with ERROR 243 (try again). A device multiplexes its databases over one connection, so
    /// this is about how many devices (or app processes) a user may sync at once.
    public var maxConnectionsPerUser: Int
    /// Sessions (bound databases) on one connection; one more BIND is refused with ERROR 244.
    public var maxSessionsPerConnection: Int
    /// Subscription sets (QUERY messages) one user may send a minute, all sessions together,
    /// with a burst of as many; past it a QUERY waits until the rate allows it.
    public var subscriptionSetsPerMinutePerUser: Int
    /// Bytes of sync messages read from one user's connections a second, all together, with a
    /// burst of as many; past it the server stops reading that user's sockets until the rate
    /// allows it (backpressure: nothing is dropped, the devices are slowed through TCP).
    public var inboundBytesPerSecondPerUser: Int
    /// Uploads of at least this many instructions are merged and validated outside the app's
    /// write lock, beside other users' uploads (`PremergedUpload`); smaller ones are merged
    /// under it. A small merge takes microseconds, less than the extra read outside the lock
    /// would cost (a round trip to PostgreSQL: on one node, 1,000 writers at 1 write/s each
    /// saw their p99 go from tens to hundreds of milliseconds when every upload paid it); a
    /// large one would hold everyone's commits for as long as it runs.
    public var premergeFromInstructions = 64
    /// A session is sent others' commits from memory only while its connection has at most
    /// this many bytes waiting to be sent; past it the session is caught up from storage once
    /// the client has read its queue down to it (issue 22, point 9). So what the server holds
    /// for a slow device is this window and one message, not the per-connection bound.
    public var fanOutWindowBytes = 1 << 20

    public init(maxSubscriptionsPerSet: Int = 1_000, maxQueryBytesPerSet: Int = 256 << 10, maxTermsPerSet: Int = 10_000,
                viewEvaluationSeconds: Double = 60, maxClientFilesPerUser: Int = 1_000,
                maxConnectionsPerUser: Int = 100, maxSessionsPerConnection: Int = 1_000,
                subscriptionSetsPerMinutePerUser: Int = 600, inboundBytesPerSecondPerUser: Int = 64 << 20) {
        self.maxSubscriptionsPerSet = maxSubscriptionsPerSet
        self.maxQueryBytesPerSet = maxQueryBytesPerSet
        self.maxTermsPerSet = maxTermsPerSet
        self.viewEvaluationSeconds = viewEvaluationSeconds
        self.maxClientFilesPerUser = maxClientFilesPerUser
        self.maxConnectionsPerUser = maxConnectionsPerUser
        self.maxSessionsPerConnection = maxSessionsPerConnection
        self.subscriptionSetsPerMinutePerUser = subscriptionSetsPerMinutePerUser
        self.inboundBytesPerSecondPerUser = inboundBytesPerSecondPerUser
    }
}
