/// What a node hears from its change feed: the app's history head, or its sync state, may have
/// moved. A signal is a hint: the receiver re-reads what it needs, so a lost or repeated signal
/// delays work but never loses it.
public struct FeedSignal: Sendable, Equatable {
    /// The head version the feed knows of (the receiver catches sessions up to at least it).
    public var headVersion: UInt64
    /// The sync state revision the feed knows of (`SyncState.revision`).
    public var stateRevision: UInt64
    public init(headVersion: UInt64, stateRevision: UInt64) {
        self.headVersion = headVersion
        self.stateRevision = stateRevision
    }
}

/// "Tell me when the app's history moved past the version I have": the seam between storage
/// and the sessions a node serves. The SQLite backend's feed is in-process (its own commits);
/// PostgreSQL's listens for NOTIFY from every node and re-reads the head on reconnect and on a
/// timer.
public protocol ChangeFeed: AnyObject, Sendable {
    /// Signals from now on, one consumer per call; ends when the storage closes. The first
    /// signal carries the state when the stream started.
    func signals() -> AsyncStream<FeedSignal>
}
