/// Which sync log entries to read, newest first.
public struct SyncLogQuery: Sendable, Equatable {
    /// One user's entries; nil: every user's (the rejected writes across users).
    public var userId: String?
    /// Only these kinds; empty: every kind.
    public var kinds: [SyncLogKind]
    /// Entries at or after / before this time (milliseconds since the epoch).
    public var sinceMilliseconds: Int64?
    public var untilMilliseconds: Int64?
    /// Entries with a smaller id only (the next page after an entry).
    public var beforeId: Int64?
    public var limit: Int

    public init(userId: String? = nil, kinds: [SyncLogKind] = [], sinceMilliseconds: Int64? = nil, untilMilliseconds: Int64? = nil,
                beforeId: Int64? = nil, limit: Int = 100) {
        self.userId = userId
        self.kinds = kinds
        self.sinceMilliseconds = sinceMilliseconds
        self.untilMilliseconds = untilMilliseconds
        self.beforeId = beforeId
        self.limit = limit
    }
}

/// How much of the sync log is kept: per user the newest `maxEntriesPerUser` entries, none
/// older than `maxAgeMilliseconds`.
public struct SyncLogRetention: Sendable, Equatable {
    public var maxEntriesPerUser: Int
    public var maxAgeMilliseconds: Int64
    public init(maxEntriesPerUser: Int = 1000, maxAgeDays: Int = 30) {
        self.maxEntriesPerUser = maxEntriesPerUser
        self.maxAgeMilliseconds = Int64(maxAgeDays) * 86_400_000
    }
}
