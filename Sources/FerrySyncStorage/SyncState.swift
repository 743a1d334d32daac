/// The app's sync state that must survive a restart and be the same on every node: an
/// admin's terminate holds until an enable, a pause until a resume (or a terminate), whichever
/// node took it and whichever restarted.
public struct SyncState: Sendable, Equatable {
    /// False between an admin's terminate and enable, and between a pause and a resume:
    /// nothing syncs.
    public var enabled: Bool
    /// True between an admin's pause and resume (then `enabled` is false): nothing syncs, but
    /// the sync identity and every client file are kept, so a resume lets devices carry on
    /// where they were. A terminate while paused clears it (then only an enable restarts sync).
    public var paused: Bool
    /// The sync identity: a new one with every enable after a terminate. Client files of an
    /// earlier identity are forgotten (their devices reset). A pause and a resume keep it.
    public var generation: UInt64
    /// Grows with every admin change (terminate, enable, pause, resume, a user disabled): a
    /// node that sees it move re-reads what it acts on.
    public var revision: UInt64
    /// The app's history head: the last committed server version (0 for an empty store).
    public var headVersion: UInt64
    public init(enabled: Bool, paused: Bool = false, generation: UInt64, revision: UInt64, headVersion: UInt64) {
        self.enabled = enabled
        self.paused = paused && !enabled
        self.generation = generation
        self.revision = revision
        self.headVersion = headVersion
    }

    /// What an admin sees: enabled, paused (a resume carries on) or terminated (an enable
    /// starts a new sync identity).
    public enum Mode: String, Sendable, Equatable {
        case enabled, paused, terminated
    }

    public var mode: Mode { enabled ? .enabled : paused ? .paused : .terminated }

    /// The state after an admin's action on `self` (the stored state, under the store's write
    /// lock), the same rule for every backend. `forgetsClientFiles`: the action starts a new
    /// sync identity (an enable after a terminate): the backend deletes every client file and
    /// the generation has grown. Nil when the action changes nothing.
    public func after(_ action: AdminAction) -> (state: SyncState, forgetsClientFiles: Bool)? {
        var next = self
        var forgets = false
        switch (action, mode) {
        case (.terminate, .enabled), (.terminate, .paused):
            next.enabled = false
            next.paused = false
        case (.enable, .terminated):
            next.enabled = true
            next.generation += 1
            forgets = true
        case (.pause, .enabled):
            next.enabled = false
            next.paused = true
        case (.resume, .paused):
            next.enabled = true
            next.paused = false
        default:
            // Terminate when terminated, enable when enabled or paused (a paused app is resumed
            // or terminated first), pause when paused or terminated, resume unless paused.
            return nil
        }
        next.revision += 1
        return (next, forgets)
    }

    /// An admin's change of the sync state (`SyncStorage.setSyncEnabled`, `setSyncPaused`).
    public enum AdminAction: Sendable {
        case terminate, enable, pause, resume
    }
}
