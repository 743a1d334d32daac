import FerryCore

/// The WebSocket of one user, shared by all the user's sessions (one per synced database).
/// Lives on the loop thread. Reconnects by itself with exponential backoff and jitter (capped)
/// while it has sessions; a refused access token is refreshed once, then retried.
final class SyncConnection: WebSocketDelegate {
    enum State: Int32 { case disconnected = 0, connecting = 1, connected = 2 }

    /// Strong: the App drops its connections when it closes, which ends the cycle.
    let app: App
    let user: SyncUser
    private(set) var state: State = .disconnected
    private var socket: WebSocketClient?
    private var sessions: [UInt64: SyncSession] = [:]
    private var nextSession: UInt64 = 1
    private var attempts = 0
    private var retryTimer: LoopTimer?
    private var shutDown = false
    private var refreshedForThisAttempt = false

    init(app: App, user: SyncUser) {
        self.app = app
        self.user = user
    }

    func add(_ session: SyncSession) {
        guard !shutDown else { return }
        let id = nextSession
        nextSession += 1
        session.attach(self, id: id)
        sessions[id] = session
        if state == .connected { session.activate() } else { connect() }
    }

    func remove(_ session: SyncSession) {
        guard let id = session.sessionId, sessions[id] === session else { return }
        sessions[id] = nil
        if state == .connected { send(.unbind(session: id)) }
        if sessions.isEmpty { close() }
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
                                 headers: [("Authorization", "Bearer \(user.accessToken)")], tls: app.configuration.tls)
        ws.delegate = self
        socket = ws
        ws.connect()
    }

    private func close() {
        retryTimer?.invalidate()
        retryTimer = nil
        let ws = socket
        socket = nil
        state = .disconnected
        ws?.close()
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
        state = .connected
        attempts = 0
        refreshedForThisAttempt = false
        app.log(.info, "Connection[\(user.id)]: connected")
        for s in sessions.values.sorted(by: { ($0.sessionId ?? 0) < ($1.sessionId ?? 0) }) { s.activate() }
    }

    func webSocket(_ socket: WebSocketClient, didReceive bytes: [UInt8]) {
        guard socket === self.socket else { return }
        let message: ProtocolMessage
        do { message = try ProtocolCodec.decode(bytes) } catch {
            app.log(.error, "the server sent a malformed message: \(error)")
            socket.close()
            return
        }
        switch message {
        case .ident(let s, _, _), .download(let s, _, _, _, _, _, _), .mark(let s, _), .unbind(let s):
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
        guard socket === self.socket else { return }
        self.socket = nil
        state = .disconnected
        for s in sessions.values { s.connectionEnded(fatal: nil) }
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
                        self.shutdown(error: SyncError(code: 401, message: "the user's session is no longer valid: \(e.message)", isFatal: true, action: .logOutUser))
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

    private func scheduleReconnect() {
        attempts += 1
        let base = min(UInt64(1) << UInt64(min(attempts, 6)), 64) * 250 // 0.5 s … 16 s
        let delay = base / 2 + UInt64.random(in: 0...(base / 2))
        if retryTimer == nil { retryTimer = LoopTimer(loop: app.loop) }
        retryTimer?.schedule(afterMilliseconds: delay) { [weak self] in self?.connect() }
    }
}
