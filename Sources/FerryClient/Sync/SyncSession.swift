import FerryCore
import FerryStore

/// The sync session of one synced database (the seeds' `SyncSession`): binds the file on its
/// user's connection, sends the subscription set, uploads local changesets, integrates
/// downloads, reports errors, and completes waits. Its state lives on the loop thread; the
/// public methods can be called from any thread and completions run on the loop thread.
public final class SyncSession: @unchecked Sendable {
    public let database: Database
    public let path: String
    let user: SyncUser
    /// Strong: a session keeps its App's machinery alive; `App.close()` stops the session.
    let app: App
    private weak var connection: SyncConnection?
    private(set) var sessionId: UInt64?
    /// Bound and identified: messages may flow.
    private var ready = false
    private var closed = false
    private var lastUploaded: UInt64 = 0
    private var acknowledged: UInt64 = 0
    private var sentQueryVersion: UInt64 = 0
    private var nextMark: UInt64 = 1
    private var markWaiters: [UInt64: @Sendable (FerryError?) -> Void] = [:]
    private var unsentMarks: [@Sendable (FerryError?) -> Void] = []
    private var uploadWaiters: [(target: UInt64, done: @Sendable (FerryError?) -> Void)] = []
    private var subscriptionWaiters: [(version: UInt64, done: @Sendable (FerryError?) -> Void)] = []
    private var fatal: SyncError?

    init(app: App, user: SyncUser, database: Database, path: String) {
        self.app = app
        self.user = user
        self.database = database
        self.path = path
        database.setCommitListener(self) { [weak self] in
            guard let self else { return }
            self.app.loop.post { self.uploadPending() }
        }
    }

    // MARK: the host's API

    /// The current subscription set, as stored in the database.
    public func subscriptions() throws -> SubscriptionSet { try SubscriptionSet.load(database) }

    /// Updates the subscription set atomically: `body` edits a copy; the result becomes the
    /// next version (state pending) and is sent to the server. Returns the new version.
    @discardableResult
    public func updateSubscriptions(_ body: (inout SubscriptionSet) throws -> Void) throws -> UInt64 {
        var set = try SubscriptionSet.load(database)
        try body(&set)
        set.version += 1
        set.state = .pending
        set.errorMessage = ""
        try set.save(database)
        let v = set.version
        app.loop.post { [self] in sendQuery() }
        return v
    }

    /// Calls `done` once the subscription set of `version` (or a later one) is complete, or
    /// with the error that stopped it.
    public func waitForSubscriptions(version: UInt64, _ done: @escaping @Sendable (FerryError?) -> Void) {
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            subscriptionWaiters.append((version, done))
            checkSubscriptionWaiters()
        }
    }

    /// Calls `done` once every local change committed before this call is acknowledged by the
    /// server (durable there), or with the error that stopped the session.
    public func waitForUpload(_ done: @escaping @Sendable (FerryError?) -> Void) {
        let target: UInt64
        do { target = try database.latestLocalVersion() } catch let e as FerryError { return app.loop.post { done(e) } } catch { return app.loop.post { done(FerryError(.internal, "\(error)")) } }
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            if closed { return done(FerryError(.closed, "the sync session is closed")) }
            uploadWaiters.append((target, done))
            checkUploadWaiters()
        }
    }

    /// Calls `done` once everything the server had when this call reached it is downloaded
    /// and integrated, or with the error that stopped the session.
    public func waitForDownload(_ done: @escaping @Sendable (FerryError?) -> Void) {
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            if closed { return done(FerryError(.closed, "the sync session is closed")) }
            if ready, let id = sessionId {
                let m = nextMark
                nextMark += 1
                markWaiters[m] = done
                connection?.send(.mark(session: id, request: m))
            } else {
                unsentMarks.append(done)
            }
        }
    }

    /// Stops syncing this database (pending waits complete with an error) and closes the handle
    /// the session owns.
    public func close() {
        database.setCommitListener(self, nil)
        let done = LoopSemaphore()
        app.loop.post { [self] in
            closed = true
            failWaiters(FerryError(.closed, "the sync session was closed"))
            app.detach(self)
            done.signal()
        }
        if !app.loop.isCurrent { done.wait() }
        database.close()
        database.scheduler.shutdown()
    }

    // MARK: the connection's side (loop thread)

    func attach(_ c: SyncConnection, id: UInt64) {
        connection = c
        sessionId = id
    }

    /// The connection is open: bind, then (once identified) query and upload.
    func activate() {
        guard !closed, fatal == nil, let id = sessionId else { return }
        ready = false
        do {
            let meta = try database.syncMetadata()
            acknowledged = meta.acknowledged
            lastUploaded = meta.acknowledged
            connection?.send(.bind(session: id, database: path, clientFileIdent: meta.clientFileIdent,
                                   clientFileSalt: meta.clientFileSalt, lastServerVersion: meta.serverVersion))
            if meta.clientFileIdent != 0 { identified() }
        } catch {
            fail(SyncError(code: 0, message: "cannot read the sync state of \(path): \(error)", isFatal: true, action: .applicationBug))
        }
    }

    private func identified() {
        ready = true
        sentQueryVersion = 0
        sendQuery()
        uploadPending()
        for m in unsentMarks { waitForDownloadNow(m) }
        unsentMarks.removeAll()
    }

    private func waitForDownloadNow(_ done: @escaping @Sendable (FerryError?) -> Void) {
        guard let id = sessionId else { return }
        let m = nextMark
        nextMark += 1
        markWaiters[m] = done
        connection?.send(.mark(session: id, request: m))
    }

    /// The connection closed (`fatal` nil: it will reconnect).
    func connectionEnded(fatal error: SyncError?) {
        ready = false
        // Marks sent on the lost connection are sent again on the next one.
        unsentMarks += markWaiters.sorted { $0.key < $1.key }.map(\.value)
        markWaiters.removeAll()
        if let error { fail(error) }
    }

    private func sendQuery() {
        guard ready, let id = sessionId else { return }
        guard let set = try? SubscriptionSet.load(database), set.version > 0, set.version != sentQueryVersion else { return }
        sentQueryVersion = set.version
        connection?.send(.query(session: id, version: set.version, subscriptions: set.subscriptions))
    }

    func uploadPending() {
        guard ready, !closed, let id = sessionId else { return }
        while true {
            guard let pending = try? database.pendingChangesets(after: lastUploaded), let last = pending.last else { return }
            connection?.send(.upload(session: id, changesets: pending.map {
                UploadChangeset(clientVersion: $0.version, lastIntegratedServerVersion: $0.base, changeset: $0.bytes)
            }))
            lastUploaded = last.version
        }
    }

    func handle(_ message: ProtocolMessage) {
        guard !closed else { return }
        switch message {
        case let .ident(_, ident, salt):
            do { try database.setClientFile(ident: ident, salt: salt) } catch {
                return fail(SyncError(code: 0, message: "cannot store the client file identity: \(error)", isFatal: true, action: .applicationBug))
            }
            identified()
        case let .download(_, serverVersion, ack, subscriptionVersion, _, isLast, changesets):
            var instructions: [Instruction] = []
            for c in changesets {
                guard let decoded = try? ChangesetCodec.decode(c.changeset) else {
                    return fail(SyncError(code: 212, message: "the server sent a malformed changeset", isFatal: true, action: .protocolViolation))
                }
                instructions += decoded.instructions
            }
            do { try database.integrate(instructions, serverVersion: serverVersion, completesVersion: isLast, acknowledged: ack) } catch {
                return fail(SyncError(code: 0, message: "cannot integrate a download into \(path): \(error)", isFatal: true, action: .applicationBug))
            }
            acknowledged = max(acknowledged, ack)
            if isLast { subscriptionCompleted(subscriptionVersion) }
            checkUploadWaiters()
        case let .mark(_, request):
            markWaiters.removeValue(forKey: request)?(nil)
        case .unbind:
            break
        case .error(let e):
            let error = SyncError(code: e.code, message: e.message, isFatal: !e.tryAgain && e.action != .warning, action: e.action,
                                  compensatingWrites: e.compensatingWrites)
            if e.code == SyncErrorText.compensatingWriteCode {
                app.log(.error, SyncErrorText.compensatingWriteLogLine(connection: 1, session: Int(sessionId ?? 1)))
            }
            if e.code == 226 { subscriptionFailed(e.message) }
            if error.isFatal { fail(error) } else { app.report(error, session: self) }
        default:
            break
        }
    }

    private func subscriptionCompleted(_ version: UInt64) {
        guard version > 0, var set = try? SubscriptionSet.load(database), set.version == version, set.state != .complete else {
            checkSubscriptionWaiters()
            return
        }
        set.state = .complete
        try? set.save(database)
        checkSubscriptionWaiters()
    }

    private func subscriptionFailed(_ message: String) {
        guard var set = try? SubscriptionSet.load(database), set.version == sentQueryVersion else { return }
        set.state = .error
        set.errorMessage = message
        try? set.save(database)
        checkSubscriptionWaiters()
    }

    private func checkSubscriptionWaiters() {
        guard let set = try? SubscriptionSet.load(database) else { return }
        subscriptionWaiters.removeAll { w in
            if set.version > w.version || (set.version == w.version && set.state == .complete) { w.done(nil); return true }
            if set.version == w.version && set.state == .error {
                w.done(FerryError(.sync, "the subscription set was rejected: \(set.errorMessage)"))
                return true
            }
            return false
        }
    }

    private func checkUploadWaiters() {
        uploadWaiters.removeAll { w in
            guard acknowledged >= w.target else { return false }
            w.done(nil)
            return true
        }
    }

    private func failWaiters(_ e: FerryError) {
        let marks = Array(markWaiters.values) + unsentMarks
        markWaiters.removeAll(); unsentMarks.removeAll()
        let uploads = uploadWaiters; uploadWaiters.removeAll()
        let subs = subscriptionWaiters; subscriptionWaiters.removeAll()
        for m in marks { m(e) }
        for u in uploads { u.done(e) }
        for s in subs { s.done(e) }
    }

    private func fail(_ error: SyncError) {
        guard fatal == nil else { return }
        fatal = error
        ready = false
        app.report(error, session: self)
        failWaiters(error.asFerryError)
    }
}
