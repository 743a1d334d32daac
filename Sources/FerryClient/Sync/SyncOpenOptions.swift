/// When opening a synced database waits for the server (the seeds' `downloadBeforeOpen`).
public enum DownloadBeforeOpen: Int32, Sendable {
    /// Open at once (offline too); sync in the background.
    case never = 0
    /// Download everything the server has for the subscriptions before every open; needs the
    /// server within the open timeout.
    case always = 1
    /// Download before the first open of the file only; later opens work offline.
    case once = 2
}

/// How a synced database is opened (SPEC F-OPEN, F-INITSUBS, F-INMEM).
public struct SyncOpenOptions: Sendable {
    public var downloadBeforeOpen: DownloadBeforeOpen
    /// How long an open that downloads first may wait for the server before it fails.
    public var openTimeoutMs: UInt64
    /// The database lives in memory under `path` used as an identifier: nothing is written to
    /// disk, and everything is dropped when its last handle closes.
    public var inMemory: Bool
    /// Fills the subscription set when the database has never had one (a new file), or on every
    /// open with `rerunInitialSubscriptions`; the result is committed as the next version.
    public var initialSubscriptions: (@Sendable (inout SubscriptionSet) throws -> Void)?
    public var rerunInitialSubscriptions: Bool
    /// What happens when the server asks for a client reset (SPEC F-RESETMODES).
    public var clientResetMode: ClientResetMode

    public init(downloadBeforeOpen: DownloadBeforeOpen = .never, openTimeoutMs: UInt64 = 30_000, inMemory: Bool = false,
                initialSubscriptions: (@Sendable (inout SubscriptionSet) throws -> Void)? = nil, rerunInitialSubscriptions: Bool = false,
                clientResetMode: ClientResetMode = .recoverUnsyncedChanges) {
        self.downloadBeforeOpen = downloadBeforeOpen
        self.openTimeoutMs = openTimeoutMs
        self.inMemory = inMemory
        self.initialSubscriptions = initialSubscriptions
        self.rerunInitialSubscriptions = rerunInitialSubscriptions
        self.clientResetMode = clientResetMode
    }
}
