import FerryAppConfig
import FerryAuth
import FerryCore
import FerrySyncStorage
import Logging

/// This node's sync logic: binds sessions, applies subscription changes with a bootstrap of
/// what entered the view and erases of what left, runs uploads through storage (the merge and
/// validation in `UploadIntegration`, inside the storage transaction that assigns the version
/// and makes it durable), acknowledges them, and sends every session what changed in its view.
///
/// The storage owns ordering and state: the history head, whether sync is enabled. The hub
/// keeps only what this node serves (`SessionRegistry`) and the newest head it has heard of.
/// A commit of this node is fanned out from memory to the sessions that are exactly at the
/// version before it; every other session (busy, behind, or served while another node
/// committed) is caught up from storage when the change feed or a local commit says the head
/// moved (`SessionCatchUp`).
actor SyncHub {
    let app: AppConfiguration
    let schema: Schema
    let storage: any SyncStorage
    let directory: any UserDirectory
    let logger: Logger
    let events: ServerEventLog
    let limits: SyncLimits
    /// `ServerConfiguration.beforeUploadMerge` (tests).
    let beforeUploadMerge: (@Sendable (String) async -> Void)?
    /// Metrics, live connections and the sync log (never waited on).
    let telemetry: SyncTelemetry
    /// Enabled, or stopped by an admin (on any node): paused until a resume, or terminated
    /// until an enable. Nothing syncs unless enabled.
    private(set) var syncMode: SyncState.Mode { didSet { status.mode = syncMode } }
    var syncEnabled: Bool { syncMode == .enabled }
    /// `syncMode` and the connection count for the admin API, readable without the actor.
    nonisolated let status = SyncStatus()
    private var stateRevision: UInt64
    /// The newest head this node knows was committed.
    var knownHead: UInt64
    private var connections: [UInt64: ConnectionOutbox] = [:] { didSet { status.connections = connections.count } }
    let sessions = SessionRegistry()
    private var nextConnection: UInt64 = 1
    private var feedTask: Task<Void, Never>?
    /// Uploads of this node between their transaction and their fan-out: while there are any,
    /// a head signal only raises `knownHead` (their own commits would otherwise be read back
    /// from storage); the last one to finish catches up whoever is still behind.
    var uploadsInFlight = 0
    /// The sessions with an upload between its transaction and its answer: never caught up
    /// from storage meanwhile, which would send one its own commit's state before the
    /// acknowledgement (its local changes, still pending, would then be laid over the
    /// server's merge instead of being replaced by it).
    var uploading: [SessionKey: Int] = [:]
    /// Sessions whose BIND was refused on their connection (a client reset, most often): the
    /// client pipelines its QUERY and UPLOADs behind a BIND, and a device that keeps writing
    /// until the refusal reaches it sends one UPLOAD per commit meanwhile. Those are dropped
    /// here until the session binds again; answering each with error 203 (logged, counted and
    /// recorded as an event) queued the reset's new BIND behind 1,405 of them, over 30 s in a
    /// loaded test run (issue 22, point 11). At most `maxSessionsPerConnection` per connection.
    private var refusedBinds: [UInt64: Set<UInt64>] = [:]
    /// Where every write is merged and committed (`UploadPipeline`); each group's commits come
    /// back to `CommitDelivery.fanOut` before any of its writers hears back.
    private lazy var pipeline = UploadPipeline(app: app, schema: schema, storage: storage, limits: limits, telemetry: telemetry,
                                               recentCommits: recentCommits, beforeUploadMerge: beforeUploadMerge) { [weak self] group in
        guard let self else { return }
        await CommitDelivery.fanOut(self, group)
    }
    /// What this node's latest upload commits wrote (`RecentCommits`): an upload merged while
    /// its connection's previous upload committed checks its reads against it, not the store.
    /// Behind a lock, not the actor: the check runs inside the group's transaction.
    nonisolated let recentCommits = LockedValue(RecentCommits())
    /// Download messages are cut at about this many changeset bytes: small enough that a
    /// bootstrap of 100,000 objects (about 1.1 MB) arrives in a handful of steps the client's
    /// progress estimate can show, large enough that the per-message cost stays negligible.
    static let downloadChunkBytes = 256 << 10

    init(app: AppConfiguration, storage: any SyncStorage, directory: any UserDirectory, logger: Logger, events: ServerEventLog,
         limits: SyncLimits = SyncLimits(), telemetry: SyncTelemetry = .detached(),
         beforeUploadMerge: (@Sendable (String) async -> Void)? = nil) async throws {
        self.beforeUploadMerge = beforeUploadMerge
        self.events = events
        self.telemetry = telemetry
        self.limits = limits
        self.app = app
        self.schema = try app.schema
        self.storage = storage
        self.directory = directory
        self.logger = logger
        let state = try await storage.syncState()
        syncMode = state.mode
        status.mode = state.mode
        stateRevision = state.revision
        knownHead = state.headVersion
        sessions.breakChain(at: knownHead)
    }

    /// Starts listening to the change feed (commits and admin changes of every node).
    func start() {
        guard feedTask == nil else { return }
        let signals = storage.changeFeed.signals()
        feedTask = Task { [weak self] in
            for await signal in signals {
                guard let self else { return }
                await self.heard(signal)
            }
        }
    }

    func stop() {
        feedTask?.cancel()
        feedTask = nil
    }

    // MARK: Connections

    func openConnection(user: UserContext) -> ConnectionOutbox {
        defer { nextConnection += 1 }
        let outbox = ConnectionOutbox(id: nextConnection, user: user, logger: logger, metrics: telemetry.metrics)
        connections[outbox.id] = outbox
        if let refusal = Self.stoppedError(syncMode, now: false) {
            outbox.send(.error(refusal))
            outbox.finish()
        }
        return outbox
    }

    func closeConnection(_ outbox: ConnectionOutbox) {
        for key in sessions.keys(onConnection: outbox.id) { sessions.remove(key) }
        refusedBinds[outbox.id] = nil
        connections[outbox.id] = nil
        outbox.finish()
    }

    /// Ends every connection of a user on this node (disabled, deleted or logged out by an
    /// admin).
    func disconnect(userId: String, message: String = "the user was disabled") {
        for c in connections.values where c.userId == userId {
            c.send(.error(ProtocolError(session: 0, code: ProtocolError.Code.unauthorized, message: message, tryAgain: false, action: .logOutUser)))
            closeConnection(c)
        }
    }

    /// The ERROR a connection gets while sync is stopped (nil when enabled): transient, so the
    /// device keeps its data and its local writes and retries with its backoff. `now`: sync
    /// was stopped just now, under a connection that was open.
    static func stoppedError(_ mode: SyncState.Mode, now: Bool) -> ProtocolError? {
        switch mode {
        case .enabled: return nil
        case .paused:
            return ProtocolError(session: 0, code: ProtocolError.Code.syncPaused, message: now ? "sync was paused on the server" : "sync is paused on the server",
                                 tryAgain: true, action: .transient)
        case .terminated:
            return ProtocolError(session: 0, code: ProtocolError.Code.syncDisabled, message: now ? "sync was terminated on the server" : "sync is disabled on the server",
                                 tryAgain: true, action: .transient)
        }
    }

    /// The admin's actions on sync and on users' connections (`SyncAdministration`).
    nonisolated var admin: SyncAdministration { SyncAdministration(hub: self, storage: storage, events: events) }

    // MARK: The change feed

    /// The head or the sync state may have moved (any node).
    private func heard(_ signal: FeedSignal) async {
        if signal.stateRevision != stateRevision {
            do {
                let state = try await storage.syncState()
                apply(state)
                await disconnectDisabledUsers()
            } catch {
                logger.error("cannot read the sync state after a change of revision \(signal.stateRevision): \(error)")
            }
        }
        SessionCatchUp.headMoved(self, to: signal.headVersion)
    }

    /// Acts on the stored sync state: a terminate or a pause ends every connection of this
    /// node. A state older than the one acted on (an answer that lost a race with the change
    /// feed) is ignored.
    func apply(_ state: SyncState) {
        guard state.revision >= stateRevision else { return }
        stateRevision = state.revision
        knownHead = max(knownHead, state.headVersion)
        let wasEnabled = syncEnabled
        syncMode = state.mode
        if wasEnabled, let error = Self.stoppedError(state.mode, now: true) {
            for c in connections.values {
                c.send(.error(error))
                closeConnection(c)
            }
        }
    }

    /// Ends the user's connections opened in or before `second` (seconds since the epoch): a
    /// device that logged in again after a revocation keeps its new connection.
    private func disconnect(userId: String, openedBySecond second: Int64) {
        for c in connections.values where c.userId == userId {
            guard let opened = telemetry.live.connection(c.id)?.connectedSinceMilliseconds, opened / 1000 <= second else { continue }
            c.send(.error(ProtocolError(session: 0, code: ProtocolError.Code.unauthorized, message: SyncAdminRules.sessionsRevokedMessage, tryAgain: false, action: .logOutUser)))
            closeConnection(c)
        }
    }

    /// Ends the connections of users an admin disabled (possibly through another node).
    private func disconnectDisabledUsers() async {
        for userId in Set(connections.values.map(\.userId)) {
            // A user deleted by an admin is gone from the directory: ended too.
            do {
                let user = try await directory.user(id: userId)
                if user?.disabled ?? true { disconnect(userId: userId, message: user == nil ? "the user was deleted" : "the user was disabled") }
                else if let user, user.sessionsValidAfter > 0 { disconnect(userId: userId, openedBySecond: user.sessionsValidAfter) }
            } catch {
                logger.warning("cannot read user \(userId) to check whether an admin disabled it: \(error)")
            }
        }
    }







    /// Takes a session's turn (see `SessionRegistry`); false if the session is gone.
    func acquire(_ key: SessionKey) async -> Bool {
        guard let s = sessions[key] else { return false }
        guard s.busy else {
            sessions[key]?.busy = true
            return true
        }
        return await withCheckedContinuation { sessions.enqueue(key, $0) }
    }

    // MARK: Messages

    /// Handles one decoded message from a connection. An upload's changesets are decoded
    /// first, on the connection's own task (in parallel with other connections, off the hub),
    /// unless `prepareAhead` did it while the connection's previous message was handled.
    nonisolated func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async {
        await receive(message, prepared: nil, from: outbox)
    }

    nonisolated func receive(_ message: ProtocolMessage, prepared: PreparedUpload?, from outbox: ConnectionOutbox) async {
        if case .upload(let session, let changesets) = message {
            let upload = prepared ?? decodeUpload(session: session, changesets, from: outbox)
            await handle(message, upload: upload, from: outbox)
            telemetry.metrics.writeAcknowledged(since: upload.arrived)
        } else {
            await handle(message, upload: nil, from: outbox)
        }
    }

    /// An upload decoded, and when large also merged (`PremergedUpload`), while the
    /// connection's previous upload is still being committed: on two cores the next upload's
    /// reads and merge run beside the previous one's writes and fsync. The merge is used only
    /// if the session is as it was (same client file, subscriptions and base cap) and what it
    /// read has not moved (`PremergedUpload.isCurrent`); otherwise the upload merges again in
    /// its turn, as if nothing had been prepared.
    nonisolated func prepareAhead(session: UInt64, _ changesets: [UploadChangeset], from outbox: ConnectionOutbox) async -> PreparedUpload? {
        var prepared = decodeUpload(session: session, changesets, from: outbox)
        guard let s = await premergeInputs(outbox, session) else { return prepared }
        let capped = prepared.decoded.map { $0.cappingBase(at: s.delivered) }
        guard capped.reduce(0, { $0 + $1.instructionCount }) >= limits.premergeFromInstructions else { return prepared }
        do {
            let premerged = try await PremergedUpload.make(storage: storage, session: session, clientFile: s.clientFile, user: outbox.user, view: s.view,
                                                           app: app, schema: schema, known: s.acknowledged, changesets: capped, beforeMerge: beforeUploadMerge)
            prepared.ahead = premerged.map { PreparedUpload.Ahead(premerged: $0, clientFile: s.clientFile, subscriptionVersion: s.subscriptionVersion, changesets: capped) }
        } catch {
            // Only an early start lost: the upload's own turn reads the store again and
            // reports what fails there.
            outbox.logger.debug("connection \(outbox.id) session \(session): the upload could not be merged ahead: \(error)")
        }
        return prepared
    }

    private nonisolated func decodeUpload(session: UInt64, _ changesets: [UploadChangeset], from outbox: ConnectionOutbox) -> PreparedUpload {
        let arrived = ContinuousClock.now
        let decoded = UploadIntegration.Decoded.all(changesets)
        telemetry.uploadReceived(outbox, session: session, decoded)
        return PreparedUpload(decoded: decoded, arrived: arrived)
    }

    /// The session an upload merged ahead is for, while sync runs and its connection is open
    /// (nil: nothing is merged ahead).
    private func premergeInputs(_ outbox: ConnectionOutbox, _ id: UInt64) -> ServerSession? {
        guard syncEnabled, let s = sessions[SessionKey(connection: outbox.id, session: id)], !s.outbox.isClosed else { return nil }
        return s
    }

    /// Storage is awaited: other connections' messages go on meanwhile, this connection's next
    /// message waits for this one.
    private func handle(_ message: ProtocolMessage, upload prepared: PreparedUpload?, from outbox: ConnectionOutbox) async {
        guard syncEnabled else { return }
        if let refused = refusedBinds[outbox.id], let session = Self.clientSession(of: message), refused.contains(session) {
            guard case .bind = message else { return }
            refusedBinds[outbox.id]?.remove(session)
        }
        do {
            switch message {
            case let .bind(session, _, ident, salt, lastServerVersion, answeredThrough):
                try await SessionBinding.bind(self, outbox, session, ident, salt, lastServerVersion, answeredThrough: answeredThrough)
            case let .query(session, v, subscriptions):
                telemetry.subscriptionStarted(outbox, session: session)
                let started = ContinuousClock.now
                let rejection = try await SubscriptionChange.query(self, outbox, session, v, subscriptions)
                telemetry.subscriptionChanged(outbox, session: session, version: v, subscriptions: subscriptions, error: rejection, started: started)
                if let e = rejection {
                    await events.record(kind: "subscription_error", userId: outbox.userId, message: e)
                }
            case let .upload(session, _):
                guard let prepared else { return }
                let rejected = try await upload(outbox, session, prepared)
                for cw in rejected {
                    telemetry.compensatingWrite(outbox, cw)
                    await events.record(kind: "compensating_write", userId: outbox.userId,
                                        message: "\"\(cw.objectType)\": { \"\(cw.primaryKey.keyText)\": \"\(cw.reason.replacingAll("\"", with: "\\\""))\" }")
                }
            case let .mark(session, request):
                // After every download sent before it (the client waits on it for "all
                // downloaded"): queued behind the session's turn.
                // The head is read from storage, not taken from the feed: a commit another
                // node acknowledged before this MARK is in what the client is told it has.
                knownHead = max(knownHead, try await storage.syncState().headVersion)
                await SessionCatchUp.catchUp(self, SessionKey(connection: outbox.id, session: session))
                outbox.send(.mark(session: session, request: request))
            case let .unbind(session):
                sessions.remove(SessionKey(connection: outbox.id, session: session))
                telemetry.sessionUnbound(outbox, session: session, reason: "unbound by the client")
                outbox.send(.unbind(session: session))
            case let .ping(timestamp):
                outbox.send(.pong(timestamp: timestamp))
            case .ident, .download, .error, .pong, .writeRules:
                // A protocol violation ends the connection (docs/protocol.md, error 201).
                outbox.send(.error(ProtocolError(session: 0, code: ProtocolError.Code.badMessage, message: "the client sent a server-only message", tryAgain: false, action: .protocolViolation)))
                closeConnection(outbox)
            }
        } catch let e as SessionFailure {
            outbox.logger.warning("connection \(outbox.id) session \(e.session): \(e.message)")
            telemetry.sessionFailed(outbox, session: e.session, code: e.code, message: e.message, trigger: e.resetTrigger)
            await events.record(kind: "session_error", userId: outbox.userId, message: "error \(e.code): \(e.message)")
            sessions.remove(SessionKey(connection: outbox.id, session: e.session))
            if case .bind = message, refusedBinds[outbox.id, default: []].count < limits.maxSessionsPerConnection {
                refusedBinds[outbox.id, default: []].insert(e.session)
            }
            outbox.send(.error(ProtocolError(session: e.session, code: e.code, message: e.message, tryAgain: false, action: e.action)))
        } catch {
            // The store failed (a node that lost its database): nothing was acknowledged; the
            // client keeps its changes and retries on a new connection.
            // The details stay in the server's log; the client gets the id to quote.
            let id = CorrelationId.make()
            outbox.logger.error("connection \(outbox.id): error id \(id): \(error)")
            telemetry.connectionFailed(outbox, code: ProtocolError.Code.storageUnavailable, message: "error id \(id): \(error)")
            closeForStoreFailure(outbox, reach: true, errorId: id)
        }
    }

    /// The session a client message names (nil for a PING and for server-only kinds).
    private static func clientSession(of message: ProtocolMessage) -> UInt64? {
        switch message {
        case .bind(let s, _, _, _, _, _), .query(let s, _, _), .upload(let s, _), .mark(let s, _), .unbind(let s): return s
        case .ping, .ident, .download, .error, .pong, .writeRules: return nil
        }
    }

    // MARK: BIND


    func session(_ outbox: ConnectionOutbox, _ id: UInt64) throws -> ServerSession {
        guard let s = sessions[SessionKey(connection: outbox.id, session: id)] else {
            throw SessionFailure(id, ProtocolError.Code.sessionNotBound, "session \(id) is not bound", .protocolViolation)
        }
        return s
    }

    // MARK: QUERY





    // MARK: UPLOAD

    /// Returns the compensating writes (already sent to the client).
    private func upload(_ outbox: ConnectionOutbox, _ id: UInt64, _ prepared: PreparedUpload) async throws -> [CompensatingWrite] {
        let s = try session(outbox, id)
        // No base later than what this session was sent (issue 22, point 5).
        let changesets = prepared.decoded.map { $0.cappingBase(at: s.delivered) }
        let ahead = prepared.ahead.flatMap { $0.matches(s, changesets) ? $0.premerged : nil }
        let (view, user, clientFile, known) = (s.view, outbox.user, s.clientFile, s.acknowledged)
        uploadsInFlight += 1
        uploading[s.key, default: 0] += 1
        defer {
            uploadsInFlight -= 1
            if let n = uploading[s.key], n > 1 { uploading[s.key] = n - 1 } else { uploading[s.key] = nil }
            if uploadsInFlight == 0 { SessionCatchUp.headMoved(self, to: knownHead) }
        }
        // What the transaction will read, read ahead with the rest of its group.
        var keys: [ObjectKey] = []
        for d in changesets { if case .success(let c) = d.changeset { keys += c.instructions.map { ObjectKey(table: $0.table, key: $0.key) } } }
        let integrationStarted = ContinuousClock.now
        let committed = try await pipeline.commit(from: SessionKey(connection: outbox.id, session: id), clientFile: clientFile, user: user,
                                               view: view, known: known, changesets: changesets, keys: keys, ahead: ahead)
        // Only now is it durable.
        telemetry.metrics.uploadIntegrated(since: integrationStarted)
        let outcome = committed.outcome
        knownHead = max(knownHead, committed.after)
        for key in sessions.keys(ofClientFile: clientFile) {
            if let other = sessions[key] { sessions[key]?.acknowledged = max(other.acknowledged, outcome.lastClientVersion) }
        }
        for cw in outcome.compensating {
            outbox.logger.warning("\"\(cw.objectType)\": { \"\(cw.primaryKey.keyText)\": \"\(cw.reason.replacingAll("\"", with: "\\\""))\" }")
        }
        await CommitDelivery.respond(self, to: s.key, committed)
        if !outcome.compensating.isEmpty {
            outbox.send(.error(ProtocolError(session: id, code: ProtocolError.Code.compensatingWrite, message: SyncErrorText.compensatingWriteMessage,
                                             tryAgain: true, action: .warning, compensatingWrites: outcome.compensating)))
        }
        return outcome.compensating
    }

    /// A backend's write (`BackendWrites`) as an upload of its own client file: merged,
    /// validated (`rules`: the app as the writer's role sees it), committed and fanned out
    /// like a device's upload; there is no session to answer. Refused while sync is not
    /// running.
    /// `captured`: a backend's SQL writes this changeset integrates (`SQLWriteIntegrator`),
    /// taken out of the inbox in the same transaction; when another node took them first the
    /// commit fails with `capturedWritesGoneCode` and nothing is written.
    func commitServerOrigin(clientFile: UInt64, user: UserContext, view: SessionView, rules: AppConfiguration, refuseCompensated: Bool,
                            upload: UploadChangeset, captured: (transaction: Int64, keys: [ObjectKey])? = nil) async throws
        -> (outcome: UploadIntegration.Outcome, version: UInt64) {
        if let refusal = Self.stoppedError(syncMode, now: false) { throw BackendWriteRefused(message: refusal.message) }
        uploadsInFlight += 1
        defer {
            uploadsInFlight -= 1
            if uploadsInFlight == 0 { SessionCatchUp.headMoved(self, to: knownHead) }
        }
        let decoded = UploadIntegration.Decoded.all([upload])
        var keys: [ObjectKey] = []
        for d in decoded { if case .success(let c) = d.changeset { keys += c.instructions.map { ObjectKey(table: $0.table, key: $0.key) } } }
        // Connection 0 is never a real one: the fan-out sends to every session concerned.
        let committed = try await pipeline.commit(from: SessionKey(connection: 0, session: 0), clientFile: clientFile, user: user, view: view,
                                               known: 0, changesets: decoded, keys: keys, ahead: nil, rules: rules,
                                               refuseCompensated: refuseCompensated, captured: captured)
        knownHead = max(knownHead, committed.after)
        return (committed.outcome, committed.after)
    }



}

/// Why a session ends with an error.
extension SyncHub {
    /// The one path for "the store is unavailable" while serving a connection: nothing it was
    /// owed is lost (the client keeps its changes and catches up again from what it has), so
    /// it is told to try again (ERROR 503, transient) and closed. `reach`: the store could not
    /// be reached at all (a message's handling), not only read; `errorId`: the id the server's
    /// log line carries, for the client to quote.
    func closeForStoreFailure(_ outbox: ConnectionOutbox, reach: Bool = false, errorId: String? = nil) {
        let message = "the server cannot \(reach ? "reach" : "read") its store; try again" + (errorId.map { " (error id \($0))" } ?? "")
        outbox.send(.error(ProtocolError(session: 0, code: ProtocolError.Code.storageUnavailable, message: message, tryAgain: true, action: .transient)))
        closeConnection(outbox)
    }

    /// Not a protocol code: a commit of captured SQL writes that another node integrated first.
    static let capturedWritesGoneCode: Int32 = -1
}

struct SessionFailure: Error, Sendable {
    let session: UInt64
    let code: Int32
    let message: String
    let action: ErrorAction
    /// Why the device must reset, when this is a client-reset error.
    let resetTrigger: ClientResetTrigger?
    init(_ session: UInt64, _ code: Int32, _ message: String, _ action: ErrorAction, trigger: ClientResetTrigger? = nil) {
        self.resetTrigger = trigger
        self.session = session
        self.code = code
        self.message = message
        self.action = action
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }
}
