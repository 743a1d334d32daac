import FerryCore
import FerrySyncStorage

/// What the admin API tells about sync (`GET /api/admin/v1/sync`: whether it is enabled,
/// paused or terminated, the sync connections open), kept beside the hub rather than read from
/// it. Under overload the hub actor has a long queue of work, and an operator asking how the
/// server is doing must not wait behind it (issue 13). The hub writes it as its own state
/// changes.
final class SyncStatus: Sendable {
    private let state: LockedValue<(mode: SyncState.Mode, connections: Int)>

    init(mode: SyncState.Mode = .enabled) { state = LockedValue((mode, 0)) }

    var mode: SyncState.Mode {
        get { state.withLock { $0.mode } }
        set { state.withLock { $0.mode = newValue } }
    }

    var syncEnabled: Bool { mode == .enabled }

    var connections: Int {
        get { state.withLock { $0.connections } }
        set { state.withLock { $0.connections = newValue } }
    }
}
