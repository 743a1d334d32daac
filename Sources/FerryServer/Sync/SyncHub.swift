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
/// moved (`catchUp`).
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
    private var syncEnabled: Bool { syncMode == .enabled }
    /// `syncMode` and the connection count for the admin API, readable without the actor.
    nonisolated let status = SyncStatus()
    private var stateRevision: UInt64
    /// The newest head this node knows was committed.
    private var knownHead: UInt64
    private var connections: [UInt64: ConnectionOutbox] = [:] { didSet { status.connections = connections.count } }
    private let sessions = SessionRegistry()
    private var nextConnection: UInt64 = 1
    private var feedTask: Task<Void, Never>?
    /// Uploads of this node between their transaction and their fan-out: while there are any,
    /// a head signal only raises `knownHead` (their own commits would otherwise be read back
    /// from storage); the last one to finish catches up whoever is still behind.
    private var uploadsInFlight = 0
    /// The sessions with an upload between its transaction and its answer: never caught up
    /// from storage meanwhile, which would send one its own commit's state before the
    /// acknowledgement (its local changes, still pending, would then be laid over the
    /// server's merge instead of being replaced by it).
    private var uploading: [SessionKey: Int] = [:]
    /// Sessions whose BIND was refused on their connection (a client reset, most often): the
    /// client pipelines its QUERY and UPLOADs behind a BIND, and a device that keeps writing
    /// until the refusal reaches it sends one UPLOAD per commit meanwhile. Those are dropped
    /// here until the session binds again; answering each with error 203 (logged, counted and
    /// recorded as an event) queued the reset's new BIND behind 1,405 of them, over 30 s in a
    /// loaded test run (issue 22, point 11). At most `maxSessionsPerConnection` per connection.
    private var refusedBinds: [UInt64: Set<UInt64>] = [:]
    /// Where every write is merged and committed (`UploadPipeline`); each group's commits come
    /// back to `fanOut` before any of its writers hears back.
    private lazy var pipeline = UploadPipeline(app: app, schema: schema, storage: storage, limits: limits, telemetry: telemetry,
                                               recentCommits: recentCommits, beforeUploadMerge: beforeUploadMerge) { [weak self] group in
        await self?.fanOut(group)
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
        headMoved(to: signal.headVersion)
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

    /// Catches up every session of this node that is behind `head`. Sessions that follow the
    /// chain of this node's fanned-out commits are at its head; when the head is newer (a
    /// commit of another node), they leave the chain and are caught up like the rest.
    private func headMoved(to head: UInt64) {
        knownHead = max(knownHead, head)
        guard uploadsInFlight == 0 else { return }
        sessions.breakChain(at: knownHead)
        var behind: [SessionKey] = []
        for key in sessions.detachedKeys {
            guard let s = sessions[key], s.hasQuery, !s.busy, s.delivered < knownHead else { continue }
            behind.append(key)
        }
        guard behind.count > 1 else {
            if let key = behind.first { startCatchUp(key) }
            return
        }
        for key in behind { sessions[key]?.busy = true }
        Task { await self.catchUp(group: behind) }
    }

    /// Catches up many sessions together (`CatchUpGroup`: each class read once for all of
    /// them), round after round until each has reached the newest head this node knows of.
    /// Holds the members' turns; a member another task is waiting for (its upload's answer, a
    /// QUERY) leaves the group after its round, and that task catches it up when it is done.
    private func catchUp(group keys: [SessionKey]) async {
        var keys = keys
        while true {
            var members: [CatchUpGroup.Member] = []
            var staying: [SessionKey] = []
            for key in keys {
                guard let s = sessions[key], s.hasQuery, s.delivered < knownHead, !s.outbox.isClosed, !sessions.hasWaiters(key) else {
                    sessions.release(key)
                    continue
                }
                members.append(CatchUpGroup.Member(session: s.id, view: s.view, delivered: s.delivered))
                staying.append(key)
            }
            keys = staying
            guard !members.isEmpty else { return }
            let target = knownHead
            let downloads: [[[UInt8]]]
            do {
                downloads = try await CatchUpGroup(members: members, schema: schema, app: app).read(from: storage, through: target)
            } catch {
                let id = CorrelationId.make()
                logger.error("error id \(id): cannot catch up \(keys.count) sessions from version \(members.map(\.delivered).min() ?? 0): \(error)")
                for key in keys {
                    if let s = sessions[key] { closeForStoreFailure(s.outbox, errorId: id) }
                    sessions.release(key)
                }
                return
            }
            for (key, chunks) in zip(keys, downloads) {
                guard let now = sessions[key] else { continue }
                if !chunks.isEmpty {
                    var batch = DownloadBatch(session: now.id, sealed: chunks)
                    batch.finish(serverVersion: target, acknowledged: now.acknowledged, subscriptionVersion: now.subscriptionVersion, to: now.outbox)
                }
                sessions[key]?.delivered = target
            }
        }
    }

    private func startCatchUp(_ key: SessionKey) {
        sessions[key]?.busy = true
        Task { await self.catchUp(key, holdingTurn: true) }
    }

    /// Sends a session everything in its view committed after its `delivered` version, read
    /// from storage, until it has reached the newest head this node knows of. Holds the
    /// session's turn throughout.
    private func catchUp(_ key: SessionKey, holdingTurn: Bool = false) async {
        if !holdingTurn { guard await acquire(key) else { return } }
        defer { sessions.release(key) }
        while let first = sessions[key], first.hasQuery, first.delivered < knownHead, !first.outbox.isClosed {
            // Read from storage only once the client has read its queue down to the window:
            // a device that does not read costs the window, not everything it is owed (the
            // session keeps its turn meanwhile; its own messages wait, as they would anyway).
            await first.outbox.waitForRoom(atMost: limits.fanOutWindowBytes)
            guard let s = sessions[key], s.hasQuery, s.delivered < knownHead, !s.outbox.isClosed else { return }
            let target = knownHead
            var batch = DownloadBatch(session: s.id)
            do {
                try await readChanges(since: s.delivered, through: target, view: s.view, classes: s.view.classes, into: &batch)
            } catch {
                s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot catch up from version \(s.delivered): \(error)")
                closeForStoreFailure(s.outbox)
                return
            }
            guard let now = sessions[key] else { return }
            if !batch.isEmpty {
                batch.finish(serverVersion: target, acknowledged: now.acknowledged, subscriptionVersion: now.subscriptionVersion, to: now.outbox)
            }
            sessions[key]?.delivered = target
        }
    }

    /// What a device catching up from `version` to `target` with `view` is sent, for
    /// `classes`. Objects changed after `target` are left for the next catch-up: a session
    /// whose own upload committed after `target` must not get that commit's state before its
    /// acknowledgement (the device would lay its pending changes over it again).
    private func readChanges(since version: UInt64, through target: UInt64, view: SessionView, classes: [String],
                             into batch: inout DownloadBatch) async throws {
        for i in try await Self.changes(in: storage, since: version, through: target, view: view, classes: classes, schema: schema, app: app) {
            batch.add(i)
        }
    }

    /// The catch-up instructions themselves, read off the hub.
    private nonisolated static func changes(in storage: any SyncStorage, since version: UInt64, through target: UInt64, view: SessionView,
                                            classes: [String], schema: Schema, app: AppConfiguration) async throws -> [Instruction] {
        var found: [Instruction] = []
        for name in classes.sorted() {
            guard let os = schema.objectSchema(named: name) else { continue }
            try await storage.changes(since: version, schema: os) { c in
                if c.version <= target, let i = view.catchUp(c, of: os, app: app) { found.append(i) }
            }
        }
        return found
    }

    /// Takes a session's turn (see `SessionRegistry`); false if the session is gone.
    private func acquire(_ key: SessionKey) async -> Bool {
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
            case let .bind(session, _, ident, salt, lastServerVersion):
                try await bind(outbox, session, ident, salt, lastServerVersion)
            case let .query(session, v, subscriptions):
                telemetry.subscriptionStarted(outbox, session: session)
                let started = ContinuousClock.now
                let rejection = try await query(outbox, session, v, subscriptions)
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
                await catchUp(SessionKey(connection: outbox.id, session: session))
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
        case .bind(let s, _, _, _, _), .query(let s, _, _), .upload(let s, _), .mark(let s, _), .unbind(let s): return s
        case .ping, .ident, .download, .error, .pong, .writeRules: return nil
        }
    }

    // MARK: BIND

    private func bind(_ outbox: ConnectionOutbox, _ id: UInt64, _ ident: UInt64, _ salt: UInt64, _ lastServerVersion: UInt64) async throws {
        let key = SessionKey(connection: outbox.id, session: id)
        guard sessions[key] == nil else { throw SessionFailure(id, ProtocolError.Code.sessionAlreadyBound, "session \(id) is already bound on this connection", .protocolViolation) }
        guard sessions.keys(onConnection: outbox.id).count < limits.maxSessionsPerConnection else {
            throw SessionFailure(id, ProtocolError.Code.tooManySessions, "the connection has \(limits.maxSessionsPerConnection) sessions bound, the most allowed; close a synced database first", .applicationBug)
        }
        let record: ClientFileRecord
        var bindVersion = lastServerVersion
        if ident == 0 {
            // Bounded per user: a device that binds new files in a loop only churns its own.
            if try await storage.clientFileCount(userId: outbox.userId) >= limits.maxClientFilesPerUser {
                try await storage.forgetLeastRecentClientFile(userId: outbox.userId)
            }
            record = try await storage.newClientFile(userId: outbox.userId)
            bindVersion = 0
            outbox.send(.ident(session: id, clientFileIdent: record.ident, clientFileSalt: record.salt))
        } else {
            // The facts the policy (`BindRules`) decides on: the stored file, and the head as
            // storage has it when the device claims more than this node heard of.
            let stored = try await storage.clientFile(ident)
            if lastServerVersion > knownHead { knownHead = max(knownHead, try await storage.syncState().headVersion) }
            let now = Int(WallClock.system.secondsSinceEpoch())
            let known = stored.map { BindRules.KnownFile(saltMatches: $0.salt == salt, sameUser: $0.userId == outbox.userId, lastSeen: $0.lastSeen) }
            switch BindRules.decide(ident: ident, file: known, lastServerVersion: lastServerVersion, head: knownHead,
                                    now: now, maxOfflineDays: app.sync.clientMaxOfflineDays) {
            case .bind:
                break
            case .refuse(let message):
                throw SessionFailure(id, ProtocolError.Code.badClientFile, message, .protocolViolation)
            case .reset(let reason, let message):
                if reason == .maxOfflineTime { try await storage.forgetClientFile(ident) }
                throw SessionFailure(id, ProtocolError.Code.badClientFile, message, BindRules.resetAction(recoveryDisabled: app.sync.recoveryDisabled),
                                     trigger: reason)
            }
            guard let r = stored else { return }  // not reached: a file the server lacks is a reset
            // Stored only once checked: a version past the head would pin what the server keeps
            // for the file (issue 22, point 8).
            try await storage.clientFileBound(ident, at: now, serverVersion: lastServerVersion)
            record = r
        }
        guard !outbox.isClosed, sessions[key] == nil else { return }
        var s = ServerSession(outbox: outbox, id: id, clientFile: record.ident, view: .empty(user: outbox.user), delivered: bindVersion)
        s.acknowledged = record.acknowledgedClientVersion
        // The view the client's data reflects: the last set the server completed for it.
        if case .success(let v) = SessionView.make(record.subscriptions, user: outbox.user, app: app, schema: schema) { s.view = v }
        s.subscriptionVersion = record.subscriptionVersion
        s.subscriptions = record.subscriptions
        sessions[key] = s
        if outbox.sendsWriteRules { outbox.send(.writeRules(session: id, rules: app.publishedWriteRules(for: outbox.user, schema: schema))) }
        telemetry.sessionBound(outbox, session: id, clientFile: record.ident, newFile: ident == 0, serverVersion: bindVersion)
    }

    private func session(_ outbox: ConnectionOutbox, _ id: UInt64) throws -> ServerSession {
        guard let s = sessions[SessionKey(connection: outbox.id, session: id)] else {
            throw SessionFailure(id, ProtocolError.Code.sessionNotBound, "session \(id) is not bound", .protocolViolation)
        }
        return s
    }

    // MARK: QUERY

    /// Returns the rejection message of a bad subscription set. Holds the session's turn: no
    /// other download reaches the session until the new view's bootstrap is sent.
    private func query(_ outbox: ConnectionOutbox, _ id: UInt64, _ setVersion: UInt64, _ subscriptions: [Subscription]) async throws -> String? {
        let key = SessionKey(connection: outbox.id, session: id)
        _ = try session(outbox, id)
        guard await acquire(key) else { return nil }
        defer { releaseAndCatchUp(key) }
        guard let started = sessions[key] else { return nil }
        let evaluation = ViewEvaluation(session: id, subscriptions: subscriptions, setVersion: setVersion, user: outbox.user, app: app, schema: schema,
                                        limits: limits, oldView: started.view, since: started.delivered,
                                        setChanged: setVersion != started.subscriptionVersion, outbox: outbox)
        let outcome: ViewEvaluation.Outcome
        do {
            outcome = try await evaluation.run(storage: storage) { [weak self] newView, snapshotVersion in
                try await self?.install(newView, at: snapshotVersion, for: key, started: started, setVersion: setVersion, subscriptions: subscriptions)
            }
        } catch let gone as ViewEvaluation.ConnectionGone {
            // A bootstrap cut short: the stored set goes back to the one the device's data
            // reflects (it asks for the new set again when it reconnects).
            if gone.afterInstall { await putBack(started) }
            return nil
        }
        // Meanwhile the connection may have closed, the session unbound or sync stopped: then
        // nobody wants this answer.
        guard syncEnabled, sessions[key] != nil, !outbox.isClosed else { return nil }
        switch outcome {
        case .rejected(let message):
            // The set is in error; the session keeps syncing the previous set.
            outbox.logger.info("client file \(started.clientFile): subscription set \(setVersion) rejected: \(message)")
            outbox.send(.error(ProtocolError(session: id, code: ProtocolError.Code.badQuery, message: message, tryAgain: false, action: .warning)))
            sessions[key]?.hasQuery = true
            // Commits of its previous view were not kept for it while it had no query: it
            // owes a catch-up to the head before it may follow the chain.
            if let s = sessions[key] { sessions[key]?.lastSkipped = max(s.lastSkipped, knownHead) }
            return message
        case .sent(let newView, let snapshotVersion):
            // What was committed after the snapshot (on any node): the current state of each
            // such object in the new view, or its erase.
            let target = max(knownHead, snapshotVersion)
            guard target > snapshotVersion else { return nil }
            var batch = DownloadBatch(session: id)
            try await readChanges(since: snapshotVersion, through: target, view: newView, classes: Array(Set(newView.classes).union(started.view.classes)),
                                  into: &batch)
            guard let s = sessions[key], !outbox.isClosed else { return nil }
            sessions[key]?.delivered = target
            if !batch.isEmpty { batch.finish(serverVersion: target, acknowledged: s.acknowledged, subscriptionVersion: setVersion, to: outbox) }
            return nil
        }
    }

    /// Installs a new view between the passes of its evaluation, before any of its bootstrap
    /// is sent; returns the acknowledged client version the bootstrap carries, or nil when
    /// nobody wants it any more. The stored set is the one whose bootstrap the client was
    /// sent: a device binding again takes it as what its data reflects. So it is saved just
    /// before the bootstrap goes out, and put back if the connection closed meanwhile.
    private func install(_ newView: SessionView, at snapshotVersion: UInt64, for key: SessionKey, started: ServerSession,
                         setVersion: UInt64, subscriptions: [Subscription]) async throws -> UInt64? {
        guard syncEnabled, sessions[key] != nil, !started.outbox.isClosed else { return nil }
        let acknowledged = try await storage.clientFile(started.clientFile)?.acknowledgedClientVersion ?? 0
        guard sessions[key] != nil, !started.outbox.isClosed else { return nil }
        try await storage.saveSubscriptions(clientFile: started.clientFile, version: setVersion, subscriptions: subscriptions)
        guard var s = sessions[key], !started.outbox.isClosed else {
            await putBack(started)
            return nil
        }
        s.acknowledged = max(s.acknowledged, acknowledged)
        s.subscriptions = subscriptions
        s.view = newView
        s.hasQuery = true
        s.subscriptionVersion = setVersion
        s.delivered = snapshotVersion
        s.busy = true
        sessions[key] = s
        sessions.reindex(key)
        return s.acknowledged
    }

    /// Puts back the subscription set a device's data reflects after a bootstrap was cut short.
    /// If the store refuses, the client file is forgotten instead: its next bind is a client
    /// reset, where taking the new set as complete would skip what entered its view (issue 22,
    /// point 10). If even that fails, the cost is logged.
    private func putBack(_ started: ServerSession) async {
        do {
            try await storage.saveSubscriptions(clientFile: started.clientFile, version: started.subscriptionVersion, subscriptions: started.subscriptions)
        } catch {
            logger.error("client file \(started.clientFile): cannot put back subscription set \(started.subscriptionVersion) after a bootstrap was cut short (\(error)); forgetting the file, so the device resets")
            do { try await storage.forgetClientFile(started.clientFile) } catch {
                logger.critical("client file \(started.clientFile): cannot forget it either (\(error)); its next bind takes the new subscription set as complete and may miss objects that entered its view until it subscribes again")
            }
        }
    }

    /// Frees a session's turn; if commits arrived meanwhile, catches it up.
    private func releaseAndCatchUp(_ key: SessionKey) {
        sessions.release(key)
        if let s = sessions[key], s.hasQuery, !s.busy, s.delivered < knownHead { startCatchUp(key) }
    }

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
            if uploadsInFlight == 0 { headMoved(to: knownHead) }
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
        await respond(to: s.key, committed)
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
            if uploadsInFlight == 0 { headMoved(to: knownHead) }
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

    /// Fans out one group's commits in version order (`GroupCommit` calls it after the group's
    /// transaction committed, before answering its uploaders).
    private func fanOut(_ group: [UploadPipeline.Committed]) {
        recentCommits.withLock { recent in
            for c in group { recent.record(before: c.before, after: c.after, written: c.outcome.entries.keys) }
        }
        for committed in group {
            knownHead = max(knownHead, committed.after)
            if committed.after > committed.before { fanOut(committed, origin: committed.origin) }
        }
    }

    /// Sends a commit of this node from memory to every other session with a query that is
    /// idle and exactly at the version before it: what entered or changed in its view, and
    /// erases of what left it. Any other session is caught up from storage.
    ///
    /// Only the sessions the fan-out index names are visited; the others follow the chain
    /// (`SessionRegistry`). Sessions that get the same instructions share their encoding.
    private func fanOut(_ committed: UploadPipeline.Committed, origin: SessionKey) {
        let (before, after) = (committed.before, committed.after)
        sessions.breakChain(at: before)
        // The uploader is answered by `respond`, from the version before its commit: it owes
        // this commit until then.
        sessions.skip(origin, owing: after)
        let changed = committed.outcome.entries.compactMap { $0.value.changed ? ($0.key, $0.value) : nil }
        var concerned: Set<SessionKey> = []
        for (k, e) in changed {
            concerned.formUnion(sessions.candidates(table: k.table, before: e.before?.values, after: e.stored.object?.values))
        }
        concerned.remove(origin)
        var sent: [SessionKey] = []
        var skippedIdle: [SessionKey] = []
        var receivers: [FanOutEncoding.Receiver] = []
        for key in concerned {
            guard let other = sessions[key], other.hasQuery else { continue }
            // Others are caught up from storage once no upload is in flight (`headMoved`); so
            // is a session whose client has not read what it was sent (`fanOutWindowBytes`).
            guard !other.busy, other.delivered == before, other.outbox.queuedBytes <= limits.fanOutWindowBytes else {
                sessions.skip(key, owing: after)
                if !other.busy { skippedIdle.append(key) }
                continue
            }
            sent.append(key)
            receivers.append(FanOutEncoding.Receiver(session: other.id, view: other.view, acknowledged: other.acknowledged,
                                            subscriptionVersion: other.subscriptionVersion, outbox: other.outbox))
        }
        FanOutEncoding(changed: changed, schema: schema).send(after, to: receivers)
        sessions.advanceChain(to: after)
        for key in sent { sessions[key]?.delivered = after }
        // An idle session that was not at `before`: ahead (a catch-up read past the chain) it
        // joins the chain once the chain reaches it; behind, it is caught up now, not when
        // this node's uploads pause, unless its own upload awaits its answer (`respond`
        // catches it up after that).
        for key in skippedIdle where uploading[key] == nil {
            guard let s = sessions[key], !s.busy else { continue }
            if s.lastSkipped <= s.delivered { sessions[key] = s } else { startCatchUp(key) }
        }
    }

    /// The uploader's answer: the acknowledgement, its reverts, and the merged state of every
    /// object it touched unless it already has exactly that. From memory when the session is
    /// exactly at the version before the commit; else (another node committed meanwhile, or a
    /// catch-up is running) from storage, after the session's turn, so it never skips a
    /// version.
    private func respond(to key: SessionKey, _ committed: UploadPipeline.Committed) async {
        guard await acquire(key) else { return }
        defer { releaseAndCatchUp(key) }
        guard let s = sessions[key], !s.outbox.isClosed else { return }
        var batch = DownloadBatch(session: s.id)
        let entries = committed.outcome.entries
        var target = committed.after
        var extras: [ObjectKey] = []
        let inMemory = s.delivered == committed.before || !s.hasQuery && s.delivered <= committed.before
        if inMemory {
            for (k, e) in entries {
                guard let os = schema.objectSchema(named: k.table) else { continue }
                let current = e.stored.object
                if e.changed && !e.exact {
                    if let current, s.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
                    else { batch.add(.erase(table: k.table, key: k.key)) }
                } else if e.rejected || !e.changed {
                    extras.append(k)
                }
            }
        } else {
            // Everything since the session's version (this commit's objects included), then
            // the objects the merge did not take as sent.
            target = max(knownHead, committed.after)
            do {
                try await readChanges(since: s.delivered, through: target, view: s.view, classes: s.view.classes, into: &batch)
                for (k, e) in entries where e.changed {
                    if !s.view.classes.contains(k.table) { batch.add(.erase(table: k.table, key: k.key)) }
                }
            } catch {
                s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot read the uploader's catch-up: \(error)")
                closeForStoreFailure(s.outbox)
                return
            }
            // Every object of the upload too, as it is now, in this message that carries the
            // acknowledgement: a catch-up that ran between the commit and this answer may have
            // sent the session its own commit's state while its changes were still pending, and
            // the device laid them over that state again (a counter incremented twice: the
            // convergence oracle under load). After the acknowledgement the device takes the
            // state as it is.
            for (k, e) in entries where e.changed && s.view.classes.contains(k.table) { extras.append(k) }
            for (k, e) in entries where e.rejected || !e.changed { extras.append(k) }
        }
        extras += committed.integration.resend.filter { entries[$0] == nil }
        // Not exactly at this commit, the session may get (or have) a later state of an object
        // the upload touched (a commit after it, possibly of the same group): an extra is then
        // read from storage, never taken from this commit, which would take that state back.
        // A revert, a write the merge did not take, or an object sent again: the server's
        // object when the user may see it (never another user's data), else an erase.
        for k in extras {
            guard let os = schema.objectSchema(named: k.table) else { continue }
            let current: StampedObject?
            if let e = entries[k], inMemory { current = e.stored.object } else {
                do { current = try await storage.object(k, schema: os)?.object } catch {
                    s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot read \(k.table) \(k.key) for the uploader: \(error)")
                    closeForStoreFailure(s.outbox)
                    return
                }
            }
            if let current, s.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
            else { batch.add(.erase(table: k.table, key: k.key)) }
        }
        guard let now = sessions[key] else { return }
        if now.hasQuery { sessions[key]?.delivered = max(now.delivered, target) }
        batch.finish(serverVersion: now.hasQuery ? max(now.delivered, target) : now.delivered, acknowledged: now.acknowledged,
                     subscriptionVersion: now.subscriptionVersion, to: now.outbox)
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
