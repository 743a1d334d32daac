import FerryCore

#if canImport(Glibc)
import Glibc
#endif

/// The WebSocket of one user, shared by all the user's sessions (one per synced database), or
/// of one session when the App does not multiplex. Lives on the loop thread. Reconnects by
/// itself with exponential backoff and jitter (capped, reset by a connection the server serves:
/// one it ends at once with a transient ERROR, sync paused for example, counts as failed) while
/// it has sessions; a refused access token is refreshed once, then retried. A connection that
/// receives nothing for the read timeout is dropped and retried; pings every ping interval
/// keep a healthy one talking.
final class SyncConnection: WebSocketDelegate {
    /// Strong: the App drops its connections when it closes, which ends the cycle.
    let app: App
    let user: SyncUser
    /// The App's key for this connection.
    let key: String
    private(set) var state: ConnectionState = .disconnected {
        didSet {
            guard state != oldValue else { return }
            for s in orderedSessions { s.connectionStateChanged(from: oldValue, to: state) }
        }
    }
    private var keepAliveTimer: LoopTimer?
    /// When to ping and when to give up on a silent server (`KeepAlive`).
    private var keepAlive: KeepAlive?
    private var socket: WebSocketClient?
    /// The open socket's server accepts BIND's `answeredThrough` and sends refusals whose
    /// answer was lost again (`ProtocolFeatures.refusalReplay`).
    private(set) var serverReplaysRefusals = false
    private var sessions: [UInt64: SyncSession] = [:]
    private var nextSession: UInt64 = 1
    /// Failed attempts in a row, which the next retry's wait grows with (`ReconnectBackoff`).
    private var backoff = ReconnectBackoff()
    private var retryTimer: LoopTimer?
    private var shutDown = false
    private var refreshedForThisAttempt = false

    init(app: App, user: SyncUser, key: String) {
        self.app = app
        self.user = user
        self.key = key
    }

    private var orderedSessions: [SyncSession] { sessions.values.sorted { ($0.sessionId ?? 0) < ($1.sessionId ?? 0) } }

    var isEmpty: Bool { sessions.isEmpty }

    func add(_ session: SyncSession) {
        guard !shutDown else { return }
        let id = nextSession
        nextSession += 1
        session.attach(self, id: id)
        sessions[id] = session
        session.connectionStateChanged(from: .disconnected, to: state)
        if state == .connected { session.activate() } else { connect() }
    }

    func remove(_ session: SyncSession) {
        guard let id = session.sessionId, sessions[id] === session else { return }
        sessions[id] = nil
        if state == .connected { send(.unbind(session: id)) }
        session.connectionStateChanged(from: state, to: .disconnected)
        if sessions.isEmpty {
            close()
            app.forget(self)
        }
    }

    func send(_ message: ProtocolMessage) {
        guard state == .connected else { return }
        socket?.send(ProtocolCodec.encode(message))
    }

    private func connect() {
        guard !shutDown, state == .disconnected, !sessions.isEmpty else { return }
        retryTimer?.cancel()
        state = .connecting
        app.log(.debug, "connecting to \(app.syncURL) for user \(user.id)")
        let ws = WebSocketClient(loop: app.loop, url: app.syncURL, subprotocol: "ferry-sync.1",
                                 headers: [("Authorization", "Bearer \(user.accessToken)"), SDKIdentity.header, SDKIdentity.featuresHeader],
                                 tls: app.configuration.tls)
        // The read timeout covers the handshake too: a server that accepts and stays silent
        // is as dead as one that stops answering later.
        ws.connectTimeoutMs = app.configuration.readTimeoutMs
        ws.delegate = self
        socket = ws
        ws.connect()
    }

    /// Tries at once (backoff reset) when waiting to retry; nothing when connected,
    /// connecting, or ended (SPEC F-RECONNECT).
    func reconnect() {
        guard !shutDown, state == .disconnected, !sessions.isEmpty else { return }
        backoff.reset()
        retryTimer?.cancel()
        connect()
    }

    private func close() {
        retryTimer?.invalidate()
        retryTimer = nil
        keepAliveTimer?.invalidate()
        keepAliveTimer = nil
        keepAlive = nil
        let ws = socket
        socket = nil
        state = .disconnected
        ws?.close()
    }

    /// Starts the keepalive of a connection that just opened: its timer wakes only when a
    /// ping or the read timeout falls due (`KeepAlive.nextTickMs`).
    private func startKeepAlive() {
        let c = app.configuration
        let now = Self.nowMs()
        keepAlive = KeepAlive(now: now, readTimeoutMs: c.readTimeoutMs, pingIntervalMs: c.pingIntervalMs)
        if keepAliveTimer == nil { keepAliveTimer = LoopTimer(loop: app.loop) }
        scheduleKeepAlive(now: now)
    }

    private func scheduleKeepAlive(now: UInt64) {
        guard let due = keepAlive?.nextTickMs(after: now) else { return }
        keepAliveTimer?.schedule(afterMilliseconds: due) { [weak self] in self?.keepAliveTick() }
    }

    private func keepAliveTick() {
        guard state == .connected, socket != nil, var k = keepAlive else { return }
        let now = Self.nowMs()
        let action = k.tick(at: now)
        keepAlive = k
        switch action {
        case .drop:
            app.log(.info, "Connection[\(user.id)]: nothing received for \(k.readTimeoutMs) ms; reconnecting")
            drop(FerryError(.timeout, "read timed out after \(k.readTimeoutMs) ms"))
            return
        case .ping:
            send(.ping(timestamp: now))
        case .wait:
            break
        }
        scheduleKeepAlive(now: now)
    }

    /// Drops the connection as a network failure would: nothing more is delivered from it, its
    /// sessions learn it is gone, and it reconnects after the backoff. (The read timeout does
    /// this; so do tests that cut a download short at a known point.)
    func drop(_ error: FerryError) {
        socket?.abort(error)
    }

    static func nowMs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }

    /// Ends the connection for good (App closed, user logged out); sessions learn why.
    func shutdown(error: SyncError? = nil) {
        shutDown = true
        let all = Array(sessions.values)
        sessions.removeAll()
        close()
        for s in all { s.connectionEnded(fatal: error) }
    }

    // MARK: WebSocketDelegate

    func webSocketDidOpen(_ socket: WebSocketClient) {
        guard socket === self.socket else { return }
        let offered = socket.responseHeaders.first { $0.0.lowercased() == ProtocolFeatures.header.lowercased() }?.1 ?? ""
        serverReplaysRefusals = ProtocolFeatures.parse(offered).contains(ProtocolFeatures.refusalReplay)
        backoff.opened()
        refreshedForThisAttempt = false
        app.log(.info, "Connection[\(user.id)]: connected")
        startKeepAlive()
        state = .connected
        for s in orderedSessions { s.activate() }
    }

    func webSocket(_ socket: WebSocketClient, didReceive bytes: [UInt8]) {
        guard socket === self.socket else { return }
        keepAlive?.received(at: Self.nowMs())
        let message: ProtocolMessage
        do { message = try ProtocolCodec.decode(bytes) } catch {
            app.log(.error, "the server sent a malformed message: \(error)")
            socket.close()
            return
        }
        // A connection-level transient ERROR ends the connection (the server closes it); it
        // counts as a failed attempt. Anything else means the server is serving this one.
        if case .error(let e) = message, e.session == 0, e.tryAgain { backoff.received(refusal: true) } else { backoff.received(refusal: false) }
        switch message {
        case .ident(let s, _, _), .download(let s, _, _, _, _, _, _), .mark(let s, _), .unbind(let s), .writeRules(let s, _):
            sessions[s]?.handle(message)
        case .error(let e):
            if e.session == 0 {
                for s in sessions.values { s.handle(message) }
                if !e.tryAgain { socket.close() }
            } else {
                sessions[e.session]?.handle(message)
            }
        case .pong, .ping: break
        case .bind, .query, .upload:
            app.log(.error, "the server sent a client-only message")
            socket.close()
        }
    }

    func webSocketDidClose(_ socket: WebSocketClient, error: FerryError?) {
        // The socket is gone (closed by the server, a network failure, or the read
        // timeout): sessions learn it, and the connection retries after a backoff.
        guard socket === self.socket else { return }
        self.socket = nil
        keepAliveTimer?.cancel()
        keepAlive = nil
        for s in orderedSessions { s.connectionEnded(fatal: nil) }
        state = .disconnected
        guard !shutDown, !sessions.isEmpty else { return }
        // A refused upgrade (Hummingbird answers every refusal with 400, a plain server 401)
        // may be an expired access token: refresh it once, then retry.
        if let status = socket.handshakeStatus, (400..<500).contains(status), !refreshedForThisAttempt {
            refreshedForThisAttempt = true
            app.log(.info, "the access token was refused; refreshing it")
            app.refreshAccessToken(user) { [weak self] result in
                guard let self else { return }
                if case .failure(let e) = result {
                    self.app.log(.error, "could not refresh the access token: \(e.message)")
                    if e.code == .auth {
                        self.shutdown(error: SyncError(code: ProtocolError.Code.unauthorized, message: "the user's session is no longer valid: \(e.message)", isFatal: true, action: .logOutUser))
                        return
                    }
                }
                self.connect()
            }
            return
        }
        if let error { app.log(.info, "Connection[\(user.id)]: disconnected: \(error.message)") }
        scheduleReconnect()
    }

    /// Waits as `ReconnectBackoff` says after this failure, then tries again.
    private func scheduleReconnect() {
        let c = app.configuration
        let delay = ReconnectBackoff.delay(attempt: backoff.failed(), minMs: c.reconnectDelayMinMs, maxMs: c.reconnectDelayMaxMs,
                                           random: { UInt64.random(in: $0) })
        if retryTimer == nil { retryTimer = LoopTimer(loop: app.loop) }
        retryTimer?.schedule(afterMilliseconds: delay) { [weak self] in self?.connect() }
    }
}
