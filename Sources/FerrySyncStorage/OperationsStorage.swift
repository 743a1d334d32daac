/// What operators read across a cluster, kept beside the sync state: every user's sync log,
/// and the connections each node has open. Apart from `SyncStorage` because nothing of it
/// orders sync: it is written in batches off the sync path, and a backend may keep it in a
/// place of its own (the embedded store uses a second SQLite file, so the log never takes the
/// sync writer's turn).
public protocol OperationsStorage: AnyObject, Sendable {
    /// Stores `entries` (their ids are assigned here, in order).
    func appendSyncLog(_ entries: [SyncLogEntry]) async throws
    /// The entries `query` selects, newest (largest id) first.
    func syncLog(_ query: SyncLogQuery) async throws -> [SyncLogEntry]
    /// Drops what `retention` does not keep: entries older than its age, and of each of
    /// `users` (nil: every user) all but the newest `maxEntriesPerUser`. Returns how many went.
    @discardableResult
    func trimSyncLog(_ retention: SyncLogRetention, users: [String]?, nowMilliseconds: Int64) async throws -> Int

    /// Replaces what `node` published before by `connections`, stamped `nowMilliseconds`.
    func publishConnections(node: String, _ connections: [LiveConnectionRecord], nowMilliseconds: Int64) async throws
    /// The connections of every node that published at or after `freshSinceMilliseconds`
    /// (a node that stopped publishing is gone); older publications are removed.
    func liveConnections(freshSinceMilliseconds: Int64) async throws -> [LiveConnectionRecord]

    func closeOperations() async
}
