/// What the admin API tells about sync (`GET /api/admin/v1/sync`: whether it is enabled, the
/// sync connections open), kept beside the hub rather than read from it. Under overload the
/// hub actor has a long queue of work, and an operator asking how the server is doing must
/// not wait behind it (issue 13). The hub writes it as its own state changes.
final class SyncStatus: Sendable {
    private let state: LockedValue<(enabled: Bool, connections: Int)>

    init(syncEnabled: Bool = true) { state = LockedValue((syncEnabled, 0)) }

    var syncEnabled: Bool {
        get { state.withLock { $0.enabled } }
        set { state.withLock { $0.enabled = newValue } }
    }

    var connections: Int {
        get { state.withLock { $0.connections } }
        set { state.withLock { $0.connections = newValue } }
    }
}
