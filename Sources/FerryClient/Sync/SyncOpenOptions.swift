import FerryCore
import FerryStore

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
    /// Called on the loop thread before an automatic client reset changes the database, with
    /// a read-only handle on a snapshot of the database as it was (lent for the call: copy it
    /// with `writeCopy(toPath:)` to keep it).
    public var beforeReset: (@Sendable (_ before: Database) -> Void)?
    /// Called on the loop thread after an automatic client reset, with the snapshot of before
    /// (lent for the call), the database after (the session's handle), and the report
    /// (`recovered` says whether the unsynced changes were recovered).
    public var afterReset: (@Sendable (_ before: Database, _ after: Database, _ report: ClientResetReport) -> Void)?
    /// The pre-flight check of local writes (SPEC F-PRECHECK): off (default), warn or strict.
    public var precheckMode: PrecheckMode = .off
    /// Gets the would-be compensating writes of a commit that fails the check (with the
    /// seeds' exact reasons) and whether the commit went ahead (`warn`) or was rolled back
    /// (`strict`): on the committing thread, before the commit returns, with no database lock
    /// held. Only failed checks are reported.
    public var precheckHandler: (@Sendable (_ rejected: [CompensatingWrite], _ committed: Bool) -> Void)?
    /// The key of an encrypted file (docs/encryption.md); a reset's snapshots and backups are
    /// encrypted with it too.
    public var encryptionKey: EncryptionKey?

    public init(downloadBeforeOpen: DownloadBeforeOpen = .never, openTimeoutMs: UInt64 = 30_000, inMemory: Bool = false,
                initialSubscriptions: (@Sendable (inout SubscriptionSet) throws -> Void)? = nil, rerunInitialSubscriptions: Bool = false,
                clientResetMode: ClientResetMode = .recoverUnsyncedChanges,
                beforeReset: (@Sendable (_ before: Database) -> Void)? = nil,
                afterReset: (@Sendable (_ before: Database, _ after: Database, _ report: ClientResetReport) -> Void)? = nil) {
        self.downloadBeforeOpen = downloadBeforeOpen
        self.openTimeoutMs = openTimeoutMs
        self.inMemory = inMemory
        self.initialSubscriptions = initialSubscriptions
        self.rerunInitialSubscriptions = rerunInitialSubscriptions
        self.clientResetMode = clientResetMode
        self.beforeReset = beforeReset
        self.afterReset = afterReset
    }
}
