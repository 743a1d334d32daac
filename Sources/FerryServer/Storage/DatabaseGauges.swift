/// What the metrics read of a PostgreSQL backend at scrape time.
struct DatabaseGauges: Sendable {
    /// Pool connections leased by Ferry now, and the pool's size.
    var poolInUse: Int
    var poolSize: Int
    /// How late the last commit notification arrived (nil before the first).
    var changeFeedLagSeconds: Double?
}
