/// Where a server keeps its state: the embedded SQLite files in the data directory (the
/// default, one node), or a PostgreSQL database that several nodes share.
public enum DatabaseLocation: Sendable, Equatable {
    case embedded
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DB`.
    case postgres(url: String)
}
