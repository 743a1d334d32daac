#if canImport(Glibc)
import Glibc
#endif
import COpenSSL
import FerryCore
import FerryStore

/// A Ferry App on this device (the seeds' `App`): which server and app it talks to, where it
/// keeps its users, and the sync machinery of its users' databases. Its network work runs on
/// Ferry's event loop thread; completions and handlers are called there.
public final class App: @unchecked Sendable {
    public let configuration: Configuration
    let loop: EventLoop
    private let lock = ThreadLock()
    private var store: UserStore?
    private var users: [String: SyncUser] = [:]
    private var order: [String] = []
    private var _errorHandler: (@Sendable (SyncSession, SyncError) -> Void)?
    private var _logger: (@Sendable (LogLevel, String) -> Void)?
    private var closed = false
    /// One connection per user, or per session without multiplexing (loop thread only).
    var connections: [String: SyncConnection] = [:]
    /// Suspended sessions, on no connection: closing the App or logging their user out ends
    /// them too (loop thread only).
    var pausedSessions: [ObjectIdentifier: SyncSession] = [:]
    private var nextConnectionKey: UInt64 = 1
    /// Remote queries in flight (`remoteFind`, `remoteCount`): the App's close ends them
    /// with `.closed`, so each completes exactly once even when the loop stops (under `lock`).
    private var remoteCalls: [ObjectIdentifier: RemoteCall] = [:]

    public init(_ configuration: Configuration) throws {
        guard !configuration.appId.isEmpty else { throw FerryError(.invalidArgument, "the app id is empty") }
        let base = try Endpoint(parsing: configuration.baseURL)
        guard base.scheme == "http" || base.scheme == "https" else {
            throw FerryError(.invalidArgument, "the base URL must start with http:// or https:// (got '\(configuration.baseURL)')")
        }
        guard base.isSecure || base.isLoopback || configuration.allowInsecureHTTP else {
            throw FerryError(.invalidArgument, "the base URL \(configuration.baseURL) is plain http to a host that is not loopback: "
                             + "logins, tokens and data would cross the network unencrypted; use https://, or opt in with "
                             + "allow_insecure_http (Swift: allowInsecureHTTP)")
        }
        guard configuration.readTimeoutMs > 0, configuration.pingIntervalMs > 0 else {
            throw FerryError(.invalidArgument, "the read timeout and the ping interval must be positive")
        }
        guard configuration.reconnectDelayMinMs > 0, configuration.reconnectDelayMaxMs >= configuration.reconnectDelayMinMs else {
            throw FerryError(.invalidArgument, "the reconnect delays must be positive, the maximum at least the minimum")
        }
        self.configuration = configuration
        _ = Self.openSSLReady
        let store = try UserStore(directory: configuration.baseDirectory, key: configuration.encryptionKey)
        self.store = store
        loop = try EventLoop.acquireShared()
        for r in try store.all() {
            users[r.id] = SyncUser(id: r.id, provider: r.provider, accessToken: r.accessToken, refreshToken: r.refreshToken,
                                   state: r.loggedIn ? .loggedIn : .loggedOut, app: self)
            order.append(r.id)
        }
    }

    /// A deinit has nothing on the loop to stop: every connection (and so every session)
    /// holds its App. It must not hand `self` to the loop either (that would outlive deinit).
    deinit { finish(stoppingConnections: false) }

    /// OpenSSL without its exit-time cleanup: a host that exits with an App still open must
    /// not have the loop thread use a torn-down OpenSSL (random bytes for a WebSocket key,
    /// a TLS read) in the last milliseconds.
    private static let openSSLReady: Bool = {
        OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil) == 1
    }()

    /// Ends every connection (their sessions' waits complete with an error) and releases the
    /// loop. Open databases stay usable locally.
    public func close() { finish(stoppingConnections: true) }

    private func finish(stoppingConnections: Bool) {
        let wasOpen: Bool = lock.withLock {
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        if stoppingConnections {
            let done = LoopSemaphore()
            loop.post { [self] in
                let error = SyncError(code: ProtocolError.Code.local, message: "the App was closed", isFatal: true, action: .applicationBug)
                for c in connections.values { c.shutdown(error: error) }
                connections.removeAll()
                let paused = pausedSessions.values
                pausedSessions.removeAll()
                for s in paused { s.connectionEnded(fatal: error) }
                let calls = lock.withLock { () -> [RemoteCall] in
                    defer { remoteCalls.removeAll() }
                    return Array(remoteCalls.values)
                }
                for c in calls { c.abandon(FerryError(.closed, "the App was closed")) }
                done.signal()
            }
            if !loop.isCurrent { done.wait() }
        }
        lock.withLock { store?.close(); store = nil }
        EventLoop.releaseShared()
    }

    /// Records a remote query in flight; false when the App is closed.
    func registerRemoteCall(_ call: RemoteCall) -> Bool {
        lock.withLock {
            guard !closed else { return false }
            remoteCalls[ObjectIdentifier(call)] = call
            return true
        }
    }

    func forgetRemoteCall(_ call: RemoteCall) { _ = lock.withLock { remoteCalls.removeValue(forKey: ObjectIdentifier(call)) } }

    // MARK: handlers

    public var errorHandler: (@Sendable (SyncSession, SyncError) -> Void)? {
        get { lock.withLock { _errorHandler } }
        set { lock.withLock { _errorHandler = newValue } }
    }

    public var logger: (@Sendable (LogLevel, String) -> Void)? {
        get { lock.withLock { _logger } }
        set { lock.withLock { _logger = newValue } }
    }

    func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level >= configuration.logLevel, let l = logger else { return }
        l(level, message())
    }

    /// Runs `body`; a failure is logged as a warning with what it costs (`cost`) and gives nil.
    /// For the reads and writes the library can carry on without, each call saying why.
    @discardableResult
    func attempt<T>(_ what: @autoclosure () -> String, cost: @autoclosure () -> String, _ body: () throws -> T) -> T? {
        do { return try body() } catch {
            log(.warn, "\(what()) failed: \(error); \(cost())")
            return nil
        }
    }

    func report(_ error: SyncError, session: SyncSession) {
        log(error.isFatal ? .error : .warn, "sync error \(error.code) on \(session.path): \(error.message)")
        errorHandler?(session, error)
    }

    // MARK: users

    public var currentUser: SyncUser? {
        lock.withLock { order.lazy.compactMap { self.users[$0] }.first { $0.isLoggedIn } }
    }

    public var allUsers: [SyncUser] { lock.withLock { order.compactMap { users[$0] } } }

    private var authBase: String { configuration.baseURL.trimmingSuffix("/") + "/api/client/v2.0" }

    /// Logs in; the completion runs on the loop thread.
    public func login(_ credentials: Credentials, completion: @escaping @Sendable (Result<SyncUser, FerryError>) -> Void) {
        let request = HTTPRequest(method: "POST", url: "\(authBase)/app/\(configuration.appId)/auth/providers/\(credentials.provider)/login",
                                  headers: [("Content-Type", "application/json")], body: Array(credentials.body.utf8))
        loop.post { [self] in
            HTTPClient.send(request, on: loop, tls: configuration.tls, timeoutMs: configuration.requestTimeoutMs) { [self] result in
                completion(result.mapError(Self.network).flatMap { response in
                    Result {
                        let json = try Self.check(response, what: "log in", throttledIsAuth: true)
                        guard let id = json["user_id"]?.stringValue, let access = json["access_token"]?.stringValue,
                              let refresh = json["refresh_token"]?.stringValue else {
                            throw FerryError(.corrupt, "the server's login answer lacks user_id, access_token or refresh_token")
                        }
                        return try self.loggedIn(id: id, provider: credentials.provider, access: access, refresh: refresh)
                    }.mapError { $0 as? FerryError ?? FerryError(.internal, "\($0)") }
                })
            }
        }
    }

    /// Registers an email/password user (then log in with `.emailPassword`).
    public func register(email: String, password: String, completion: @escaping @Sendable (Result<Void, FerryError>) -> Void) {
        let request = HTTPRequest(method: "POST", url: "\(authBase)/app/\(configuration.appId)/auth/providers/local-userpass/register",
                                  headers: [("Content-Type", "application/json")],
                                  body: Array(JSON.encodeObject([("email", email), ("password", password)]).utf8))
        loop.post { [self] in
            HTTPClient.send(request, on: loop, tls: configuration.tls, timeoutMs: configuration.requestTimeoutMs) { result in
                completion(result.mapError(Self.network).flatMap { r in Result { _ = try Self.check(r, what: "register", throttledIsAuth: true) }.mapError { $0 as? FerryError ?? FerryError(.internal, "\($0)") } })
            }
        }
    }

    /// Logs a user out: its refresh token is revoked on the server (best effort, offline too),
    /// its sessions stop, and it stays in the cache as logged out.
    public func logOut(_ user: SyncUser, completion: @escaping @Sendable (Result<Void, FerryError>) -> Void) {
        let request = HTTPRequest(method: "DELETE", url: "\(authBase)/auth/session", headers: [("Authorization", "Bearer \(user.refreshToken)")])
        user.update(state: .loggedOut)
        let saved: Result<Void, FerryError> = Result { () throws -> Void in try lock.withLock { try store?.save(user.record, bump: false) } }
            .mapError { $0 as? FerryError ?? FerryError(.io, "\($0)") }
        loop.post { [self] in
            let error = SyncError(code: ProtocolError.Code.local, message: "the user logged out", isFatal: true, action: .logOutUser)
            for (key, c) in connections where c.user === user {
                connections[key] = nil
                c.shutdown(error: error)
            }
            for (key, s) in pausedSessions where s.user === user {
                pausedSessions[key] = nil
                s.connectionEnded(fatal: error)
            }
            HTTPClient.send(request, on: loop, tls: configuration.tls, timeoutMs: configuration.requestTimeoutMs) { _ in completion(saved) }
        }
    }

    private func loggedIn(id: String, provider: String, access: String, refresh: String) throws -> SyncUser {
        try lock.withLock {
            let user: SyncUser
            if let u = users[id] {
                u.update(accessToken: access, refreshToken: refresh, state: .loggedIn)
                user = u
            } else {
                user = SyncUser(id: id, provider: provider, accessToken: access, refreshToken: refresh, state: .loggedIn, app: self)
                users[id] = user
            }
            order.removeAll { $0 == id }
            order.insert(id, at: 0)
            try store?.save(user.record, bump: true)
            return user
        }
    }

    /// Gets a new access token with the refresh token (loop thread).
    func refreshAccessToken(_ user: SyncUser, completion: @escaping (Result<Void, FerryError>) -> Void) {
        let request = HTTPRequest(method: "POST", url: "\(authBase)/auth/session", headers: [("Authorization", "Bearer \(user.refreshToken)")])
        HTTPClient.send(request, on: loop, tls: configuration.tls, timeoutMs: configuration.requestTimeoutMs) { [self] result in
            completion(result.mapError(Self.network).flatMap { r in
                Result {
                    let json = try Self.check(r, what: "refresh the access token")
                    guard let access = json["access_token"]?.stringValue else { throw FerryError(.corrupt, "the refresh answer has no access_token") }
                    user.update(accessToken: access)
                    try lock.withLock { try store?.save(user.record, bump: false) }
                }.mapError { $0 as? FerryError ?? FerryError(.internal, "\($0)") }
            })
        }
    }

    /// A transport failure (resolve, connect, TLS, a broken or malformed answer) is a network
    /// error for the host; a timeout stays a timeout.
    static func network(_ e: FerryError) -> FerryError {
        guard e.code == .io else { return e }
        return FerryError(e.message.contains("timed out") ? .timeout : .network, e.message)
    }

    /// The JSON body of a 2xx answer, or the server's error as a FerryError.
    ///
    /// For a login or a registration (`throttledIsAuth`), a 429 (too many failed logins for
    /// the account or address, or too many sign-ups) is an auth error, not a network one: the
    /// server answered and refused, and retrying at once does not help. Its message ends with
    /// `retry after N s` (the `Retry-After` header; 1 when absent), so a host can tell the user
    /// when to try again. Elsewhere (a refresh) it stays a network error: an auth error there
    /// would log the user out.
    static func check(_ r: HTTPResponse, what: String, throttledIsAuth: Bool = false) throws -> JSON {
        let json = r.body.isEmpty ? JSON.object([]) : (try? JSON.parse(r.body)) ?? .null
        guard (200..<300).contains(r.status) else {
            let message = json["error"]?.stringValue ?? "HTTP \(r.status)"
            let code = json["error_code"]?.stringValue ?? "HTTP\(r.status)"
            if r.status == 429 && throttledIsAuth {
                let seconds = r.header("Retry-After").flatMap { Int(String($0.filter { $0 != " " })) }.map { max(0, $0) } ?? 1
                throw FerryError(.auth, "could not \(what): \(message) (\(code)); retry after \(seconds) s")
            }
            throw FerryError(r.status == 401 || r.status == 403 || r.status == 404 && code == "UserNotFound" ? .auth : .network,
                             "could not \(what): \(message) (\(code))")
        }
        return json
    }

    // MARK: sync

    /// The sync URL of the app (`ws://` or `wss://`).
    var syncURL: String {
        let base = configuration.baseURL.trimmingSuffix("/")
        let ws = base.hasPrefix("https://") ? "wss://" + base.dropFirst(8) : "ws://" + base.dropFirst(7)
        return ws + "/api/client/v2.0/app/\(configuration.appId)/realm-sync"
    }

    /// Opens a synced database of `user` at `path` (an identifier when in memory) with
    /// `schema` and starts its session, without waiting for the server: `downloadBeforeOpen`
    /// must be `.never` here (the completion form waits for downloads). Works offline with a
    /// cached logged-in user.
    public func openSynced(user: SyncUser, path: String, schema: Schema, options: SyncOpenOptions = SyncOpenOptions()) throws -> SyncSession {
        guard options.downloadBeforeOpen == .never else {
            throw FerryError(.invalidArgument, "downloadBeforeOpen \(options.downloadBeforeOpen) waits for the server: use the open with a completion")
        }
        return try startSession(user: user, path: path, schema: schema, options: options)
    }

    /// Opens a synced database and calls `completion` on the loop thread with its session:
    /// at once for `.never` (and for `.once` after the file's first successful download),
    /// otherwise once everything the server has for the subscriptions (initial ones included)
    /// is downloaded. Fails with `.timeout` when that takes longer than the open timeout
    /// (e.g. the server is unreachable); the session is then closed.
    public func openSynced(user: SyncUser, path: String, schema: Schema, options: SyncOpenOptions,
                           completion: @escaping @Sendable (Result<SyncSession, FerryError>) -> Void) {
        let session: SyncSession
        do { session = try startSession(user: user, path: path, schema: schema, options: options) } catch {
            let e = error as? FerryError ?? FerryError(.internal, "\(error)")
            loop.post { completion(.failure(e)) }
            return
        }
        // Unreadable counts as never downloaded: the open then waits for a download (the safe side).
        let downloadedOnce = attempt("\(path): reading whether it was downloaded once", cost: "the open waits for a download") {
            try session.database.syncValue(Self.downloadedOnceKey) != nil
        } ?? false
        let wait = options.downloadBeforeOpen == .always || (options.downloadBeforeOpen == .once && !downloadedOnce)
        guard wait else {
            loop.post { completion(.success(session)) }
            return
        }
        let finish = OpenCompletion(completion)
        loop.post { [self] in
            // Touched on the loop thread only (both closures below run there).
            let timer = UncheckedSendable(LoopTimer(loop: loop))
            timer.value.schedule(afterMilliseconds: options.openTimeoutMs) { [self] in
                let state = session.connectionState
                guard finish.claim() else { return }
                session.close()
                finish.deliver(.failure(FerryError(.timeout, "could not download \(path) before opening it within \(options.openTimeoutMs) ms "
                    + "(the connection to \(configuration.baseURL) is \(state)); open with downloadBeforeOpen never to work offline")))
            }
            let done: @Sendable (FerryError?) -> Void = { error in
                guard finish.claim() else { return }
                timer.value.invalidate()
                if let error {
                    session.close()
                    return finish.deliver(.failure(error))
                }
                if options.downloadBeforeOpen == .once {
                    self.attempt("\(path): recording that it was downloaded once", cost: "the next open waits for a download again") {
                        try session.database.setSyncValue(Self.downloadedOnceKey, [1])
                    }
                }
                finish.deliver(.success(session))
            }
            let version = attempt("\(path): reading its subscription set", cost: "the open waits only for the server's answer") {
                try session.subscriptions().version
            } ?? 0
            // No subscription set yet: nothing syncs down (SPEC F-REQSUB), so the open waits
            // only for the server to answer, not for a set that may never come.
            guard version > 0 else { return session.waitForDownload(done) }
            session.waitForSubscriptions(version: version) { error in
                if let error { return done(error) }
                session.waitForDownload(done)
            }
        }
    }

    static let downloadedOnceKey = "downloaded_once"

    private func startSession(user: SyncUser, path: String, schema: Schema, options: SyncOpenOptions) throws -> SyncSession {
        guard user.app === self else { throw FerryError(.invalidArgument, "the user belongs to another App") }
        guard user.isLoggedIn else { throw FerryError(.auth, "user \(user.id) is logged out; log in again to open its synced databases") }
        guard !lock.withLock({ closed }) else { throw FerryError(.closed, "the App is closed") }
        guard options.openTimeoutMs > 0 else { throw FerryError(.invalidArgument, "the open timeout must be positive") }
        let scheduler = try LoopScheduler()
        var db: Database
        do {
            var configuration = DatabaseConfiguration(location: options.inMemory ? .memory(path) : .file(path), schema: schema, synced: true,
                                                      encryptionKey: options.encryptionKey)
            // Another process may be the file's sync agent (SPEC F-MULTIPROC): this one then
            // opens in standby, reads and writes, and takes the role when the agent goes.
            configuration.allowStandby = true
            db = try Database.open(configuration, scheduler: scheduler)
            // The file may already be open in this process without the role (a plain handle).
            if !db.isSyncAgent { _ = try? db.becomeSyncAgent() }
            // A client reset the host left pending (SPEC F-RESETMANUAL) happens now, when
            // nothing else in this process has the file open: it moves to its backup path and
            // the open starts a fresh file.
            if db.isSyncAgent, let backup = try SyncSession.pendingResetBackup(db), db.handleCount == 1 {
                db.close()
                try Database.moveFile(path, to: backup)
                log(.info, "client reset of \(path): the old file is at \(backup); a fresh copy downloads")
                db = try Database.open(configuration, scheduler: scheduler)
            }
            // Snapshots of a reset the process died in (SPEC F-RESET: the file itself is
            // consistent, the reset runs again) are left over: only this file's sync agent makes
            // them, and that is this open now.
            if !options.inMemory, db.isSyncAgent, db.handleCount == 1 { SyncSession.removeStaleSnapshots(of: path) }
        } catch {
            scheduler.shutdown()
            throw error
        }
        let session: SyncSession
        do {
            session = try SyncSession(app: self, user: user, database: db, path: path, options: options)
            if let initial = options.initialSubscriptions {
                let current = try session.subscriptions()
                if current.version == 0 || options.rerunInitialSubscriptions { try session.updateSubscriptions(initial) }
            }
        } catch {
            db.close()
            scheduler.shutdown()
            throw error
        }
        loop.post { [self] in
            if session.database.isSyncAgent { attach(session) } else { session.enterStandby() }
        }
        return session
    }

    /// Performs a client reset the error handler was given (SPEC F-RESETMANUAL) at once: the
    /// database file moves to the error's backup path (an ordinary Ferry database from then
    /// on), and the next open of the path downloads a fresh copy. `token` is the error's
    /// `clientResetToken`. The session must be closed and no handle of this process may have
    /// the file open (`invalidArgument` otherwise); `notFound` when no reset is pending there.
    public func immediatelyHandleClientReset(token: String) throws {
        guard !Database.isOpenInThisProcess(path: token) else {
            throw FerryError(.invalidArgument, "\(token) is still open: close its sync session and every handle on it first")
        }
        guard !token.isEmpty, access(token, F_OK) == 0 else { throw FerryError(.notFound, "no client reset is pending for \(token): no such file") }
        let db = try Database.open(DatabaseConfiguration(location: .file(token), schema: nil, readOnly: true), scheduler: PollingScheduler())
        let backup = try SyncSession.pendingResetBackup(db)
        db.close()
        guard let backup else { throw FerryError(.notFound, "no client reset is pending for \(token)") }
        try Database.moveFile(token, to: backup)
        log(.info, "client reset of \(token): the old file is at \(backup); the next open downloads a fresh copy")
    }

    /// Puts a session on its connection (loop thread): the user's shared one, or a new one
    /// when the App does not multiplex.
    func attach(_ session: SyncSession) {
        let key: String
        if configuration.multiplexSessions { key = session.user.id } else {
            key = session.user.id + "#" + String(nextConnectionKey)
            nextConnectionKey += 1
        }
        let c: SyncConnection
        if let existing = connections[key] { c = existing } else {
            c = SyncConnection(app: self, user: session.user, key: key)
            connections[key] = c
        }
        c.add(session)
    }

    /// A connection without sessions is closed and forgotten (loop thread).
    func forget(_ connection: SyncConnection) {
        if connections[connection.key] === connection { connections[connection.key] = nil }
    }

    /// Makes every connection waiting to retry try now, with its backoff reset (SPEC
    /// F-RECONNECT). Does nothing for connections that are connected or connecting (a silent
    /// connection is dropped by the read timeout, not by this), or whose sessions ended.
    public func reconnect() {
        loop.post { [self] in
            for c in connections.values { c.reconnect() }
        }
    }
}
