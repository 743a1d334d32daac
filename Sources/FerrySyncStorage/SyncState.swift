/// The app's sync state that must survive a restart and be the same on every node: an
/// admin's terminate holds until an enable, whichever node took it and whichever restarted.
public struct SyncState: Sendable, Equatable {
    /// False between an admin's terminate and enable: nothing syncs.
    public var enabled: Bool
    /// The sync identity: a new one with every enable after a terminate. Client files of an
    /// earlier identity are forgotten (their devices reset).
    public var generation: UInt64
    /// Grows with every admin change (terminate, enable, a user disabled): a node that sees it
    /// move re-reads what it acts on.
    public var revision: UInt64
    /// The app's history head: the last committed server version (0 for an empty store).
    public var headVersion: UInt64
    public init(enabled: Bool, generation: UInt64, revision: UInt64, headVersion: UInt64) {
        self.enabled = enabled
        self.generation = generation
        self.revision = revision
        self.headVersion = headVersion
    }
}
