import FerryCore

/// A user of an App on this device (the seeds' `User`): its id and tokens. Tokens change on
/// refresh; reads and writes go through a lock because the host reads them from its threads
/// while the engine refreshes them on the loop thread.
public final class SyncUser: @unchecked Sendable {
    public enum State: Int32, Sendable { case loggedOut = 0, loggedIn = 1, removed = 2 }

    public let id: String
    public let provider: String
    private let lock = ThreadLock()
    private var _accessToken: String
    private var _refreshToken: String
    private var _state: State
    public internal(set) weak var app: App?

    init(id: String, provider: String, accessToken: String, refreshToken: String, state: State, app: App) {
        self.id = id
        self.provider = provider
        self._accessToken = accessToken
        self._refreshToken = refreshToken
        self._state = state
        self.app = app
    }

    public var accessToken: String { lock.withLock { _accessToken } }
    public var refreshToken: String { lock.withLock { _refreshToken } }
    public var state: State { lock.withLock { _state } }
    public var isLoggedIn: Bool { state == .loggedIn }

    func update(accessToken: String? = nil, refreshToken: String? = nil, state: State? = nil) {
        lock.withLock {
            if let accessToken { _accessToken = accessToken }
            if let refreshToken { _refreshToken = refreshToken }
            if let state { _state = state }
        }
    }

    var record: UserStore.Record {
        lock.withLock { UserStore.Record(id: id, accessToken: _accessToken, refreshToken: _refreshToken, provider: provider, loggedIn: _state == .loggedIn) }
    }
}
