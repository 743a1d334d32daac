import FerryAppConfig
import FerryCore
import Logging

/// The server's sync logic: binds sessions, applies subscription changes with a bootstrap of
/// what entered the view and erases of what left, merges uploads (FerryCore's `ObjectMerge`),
/// validates every uploaded object write against the role's write filter and the session's
/// subscriptions, makes the result durable, acknowledges it, and sends the merged objects to
/// every session that sees them (the uploader included, so every replica converges on the
/// server's decision). One actor: every change is ordered, every download is sent in order.
actor SyncHub {
    let app: AppConfiguration
    let schema: Schema
    let storage: SyncStorage
    let logger: Logger
    let events: ServerEventLog
    let limits: SyncLimits
    /// False between an admin's terminate and enable: nothing syncs.
    private(set) var syncEnabled = true
    /// The sync connections open now.
    var connectionCount: Int { connections.count }
    private var connections: [UInt64: ConnectionOutbox] = [:]
    private var sessions: [SessionKey: ServerSession] = [:]
    private var version: UInt64
    private var nextConnection: UInt64 = 1
    /// Download messages are cut at about this many changeset bytes: small enough that a
    /// bootstrap of 100,000 objects (about 1.1 MB) arrives in a handful of steps the client's
    /// progress estimate can show, large enough that the per-message cost stays negligible.
    static let downloadChunkBytes = 256 << 10
    /// The protocol errors (docs/protocol.md).
    static let badQueryCode: Int32 = 226
    static let badClientFileCode: Int32 = 208
    static let badChangesetCode: Int32 = 212

    static let syncDisabledCode: Int32 = 240

    init(app: AppConfiguration, storage: SyncStorage, logger: Logger, events: ServerEventLog, limits: SyncLimits = SyncLimits()) throws {
        self.events = events
        self.limits = limits
        self.app = app
        self.schema = try app.schema
        self.storage = storage
        self.logger = logger
        self.version = try storage.serverVersion()
    }

    func openConnection(user: UserContext) -> ConnectionOutbox {
        defer { nextConnection += 1 }
        let outbox = ConnectionOutbox(id: nextConnection, user: user)
        connections[outbox.id] = outbox
        if !syncEnabled {
            outbox.send(.error(ProtocolError(session: 0, code: Self.syncDisabledCode, message: "sync is disabled on the server", tryAgain: true, action: .transient)))
            outbox.finish()
        }
        return outbox
    }

    func closeConnection(_ outbox: ConnectionOutbox) {
        sessions = sessions.filter { $0.key.connection != outbox.id }
        connections[outbox.id] = nil
        outbox.finish()
    }

    /// Ends every connection of a user (disabled by an admin).
    func disconnect(userId: String) {
        for c in connections.values where c.userId == userId {
            c.send(.error(ProtocolError(session: 0, code: 401, message: "the user was disabled", tryAgain: false, action: .logOutUser)))
            closeConnection(c)
        }
    }

    /// Admin: stops sync for everyone. Devices keep their data and retry until sync is enabled.
    func terminateSync() async {
        syncEnabled = false
        for c in connections.values {
            c.send(.error(ProtocolError(session: 0, code: Self.syncDisabledCode, message: "sync was terminated on the server", tryAgain: true, action: .transient)))
            closeConnection(c)
        }
        await events.record(kind: "sync_terminated", userId: nil, message: "sync terminated by an admin")
    }

    /// Admin: enables sync again with a new server file identity: every device known before
    /// must reset (its next BIND is answered with a client-reset error).
    func enableSync() async throws {
        guard !syncEnabled else { return }
        try storage.forgetClientFiles()
        syncEnabled = true
        await events.record(kind: "sync_enabled", userId: nil, message: "sync enabled by an admin; known client files were forgotten")
    }

    /// Handles one decoded message from a connection. A QUERY's view is evaluated off the hub
    /// (`ViewEvaluation`): other connections' messages go on meanwhile, this connection's next
    /// message waits for this one.
    func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async {
        guard syncEnabled else { return }
        do {
            switch message {
            case let .bind(session, _, ident, salt, lastServerVersion):
                try bind(outbox, session, ident, salt, lastServerVersion)
            case let .query(session, v, subscriptions):
                if let e = try await query(outbox, session, v, subscriptions) {
                    await events.record(kind: "subscription_error", userId: outbox.userId, message: e)
                }
            case let .upload(session, changesets):
                let rejected = try upload(outbox, session, changesets)
                for cw in rejected {
                    await events.record(kind: "compensating_write", userId: outbox.userId,
                                        message: "\"\(cw.objectType)\": { \"\(cw.primaryKey.keyText)\": \"\(cw.reason.replacingAll("\"", with: "\\\""))\" }")
                }
            case let .mark(session, request):
                outbox.send(.mark(session: session, request: request))
            case let .unbind(session):
                sessions[SessionKey(connection: outbox.id, session: session)] = nil
                outbox.send(.unbind(session: session))
            case let .ping(timestamp):
                outbox.send(.pong(timestamp: timestamp))
            case .ident, .download, .error, .pong:
                // A protocol violation ends the connection (docs/protocol.md, error 201).
                outbox.send(.error(ProtocolError(session: 0, code: 201, message: "the client sent a server-only message", tryAgain: false, action: .protocolViolation)))
                closeConnection(outbox)
            }
        } catch let e as SessionFailure {
            logger.warning("connection \(outbox.id) session \(e.session): \(e.message)")
            await events.record(kind: "session_error", userId: outbox.userId, message: "error \(e.code): \(e.message)")
            sessions[SessionKey(connection: outbox.id, session: e.session)] = nil
            outbox.send(.error(ProtocolError(session: e.session, code: e.code, message: e.message, tryAgain: false, action: e.action)))
        } catch {
            logger.error("connection \(outbox.id): \(error)")
            outbox.send(.error(ProtocolError(session: 0, code: 500, message: "internal server error: \(error)", tryAgain: true, action: .transient)))
        }
    }

    // MARK: BIND

    /// The action of a client-reset error: without recovery when the sync configuration
    /// disables it (`is_recovery_mode_disabled`), so the device discards or asks its host.
    private var resetAction: ErrorAction { app.sync.recoveryDisabled ? .clientResetNoRecovery : .clientReset }

    private func bind(_ outbox: ConnectionOutbox, _ id: UInt64, _ ident: UInt64, _ salt: UInt64, _ lastServerVersion: UInt64) throws {
        let key = SessionKey(connection: outbox.id, session: id)
        guard sessions[key] == nil else { throw SessionFailure(id, 204, "session \(id) is already bound on this connection", .protocolViolation) }
        let record: ClientFileRecord
        var bindVersion = lastServerVersion
        if ident == 0 {
            // Bounded per user: a device that binds new files in a loop only churns its own.
            if try storage.clientFileCount(userId: outbox.userId) >= limits.maxClientFilesPerUser {
                try storage.forgetLeastRecentClientFile(userId: outbox.userId)
            }
            record = try storage.newClientFile(userId: outbox.userId)
            bindVersion = 0
            outbox.send(.ident(session: id, clientFileIdent: record.ident, clientFileSalt: record.salt))
        } else {
            guard let r = try storage.clientFile(ident), r.salt == salt else {
                throw SessionFailure(id, Self.badClientFileCode, "the server does not know client file \(ident): the device must reset", resetAction)
            }
            guard r.userId == outbox.userId else {
                throw SessionFailure(id, Self.badClientFileCode, "client file \(ident) belongs to another user", .protocolViolation)
            }
            // A file offline longer than the client maximum offline time: the server no longer
            // keeps what it would need to sync it (SPEC F-RESET), so it is forgotten and reset.
            let now = ServerClock.secondsSinceEpoch()
            let maxOfflineDays = app.sync.clientMaxOfflineDays
            if maxOfflineDays > 0, r.lastSeen > 0, now - r.lastSeen > maxOfflineDays * 86_400 {
                try storage.forgetClientFile(ident)
                throw SessionFailure(id, Self.badClientFileCode, "client file \(ident) was last seen \((now - r.lastSeen) / 86_400) days ago, longer than the client maximum offline time of \(maxOfflineDays) days: the device must reset", resetAction)
            }
            try storage.touchClientFile(ident, at: now)
            guard lastServerVersion <= version else {
                throw SessionFailure(id, Self.badClientFileCode, "the client has server version \(lastServerVersion), newer than the server's \(version): the device must reset", resetAction)
            }
            record = r
        }
        var s = ServerSession(outbox: outbox, id: id, clientFile: record.ident, view: .empty(user: outbox.user), bindVersion: bindVersion)
        s.acknowledged = record.acknowledgedClientVersion
        // The view the client's data reflects: the last set the server completed for it.
        if case .success(let v) = SessionView.make(record.subscriptions, user: outbox.user, app: app, schema: schema) { s.view = v }
        s.subscriptionVersion = record.subscriptionVersion
        sessions[key] = s
    }

    private func session(_ outbox: ConnectionOutbox, _ id: UInt64) throws -> ServerSession {
        guard let s = sessions[SessionKey(connection: outbox.id, session: id)] else {
            throw SessionFailure(id, 203, "session \(id) is not bound", .protocolViolation)
        }
        return s
    }

    // MARK: QUERY

    /// Returns the rejection message of a bad subscription set.
    private func query(_ outbox: ConnectionOutbox, _ id: UInt64, _ setVersion: UInt64, _ subscriptions: [Subscription]) async throws -> String? {
        let key = SessionKey(connection: outbox.id, session: id)
        let started = try session(outbox, id)
        let snapshotVersion = version
        let evaluation = ViewEvaluation(session: id, subscriptions: subscriptions, user: outbox.user, app: app, schema: schema, limits: limits,
                                        oldView: started.view, since: started.bindVersion,
                                        setChanged: setVersion != started.subscriptionVersion, outbox: outbox)
        let outcome: ViewEvaluation.Outcome
        do { outcome = try await evaluation.run(storage: storage) } catch is ViewEvaluation.ConnectionGone { return nil }
        // Meanwhile the connection may have closed, the session unbound or sync stopped: then
        // nobody wants this answer.
        guard syncEnabled, var s = sessions[key], !outbox.isClosed else { return nil }
        if let record = try storage.clientFile(s.clientFile) { s.acknowledged = max(s.acknowledged, record.acknowledgedClientVersion) }
        switch outcome {
        case .rejected(let message):
            // The set is in error; the session keeps syncing the previous set.
            logger.info("client file \(s.clientFile): subscription set \(setVersion) rejected: \(message)")
            outbox.send(.error(ProtocolError(session: id, code: Self.badQueryCode, message: message, tryAgain: false, action: .warning)))
            if !s.hasQuery { s.hasQuery = true; sessions[key] = s }
            return message
        case .ready(let newView, var batch):
            // What was committed while the view was evaluated (uploads fanned out to this
            // session with its old view meanwhile): the current state of each such object.
            if version > snapshotVersion {
                var caughtUp: [Instruction] = []
                for name in Set(newView.classes).union(started.view.classes).sorted() {
                    guard let os = schema.objectSchema(named: name) else { continue }
                    try storage.changes(since: snapshotVersion, schema: os) { c in
                        if let i = newView.catchUp(c, of: os, app: app) { caughtUp.append(i) }
                    }
                }
                for i in caughtUp { batch.add(i) }
            }
            try storage.saveSubscriptions(clientFile: s.clientFile, version: setVersion, subscriptions: subscriptions)
            s.view = newView
            s.hasQuery = true
            s.subscriptionVersion = setVersion
            s.bindVersion = version
            sessions[key] = s
            batch.finish(serverVersion: version, acknowledged: s.acknowledged, subscriptionVersion: setVersion, to: outbox)
            return nil
        }
    }

    // MARK: UPLOAD

    /// What one upload did to one object.
    private struct UploadEntry {
        var stored: StoredObject
        /// The object before the upload (for erases of what left a view).
        let before: StampedObject?
        var changed = false
        /// Every instruction applied exactly as the client made it, with no concurrent change:
        /// the uploader already has this state (no echo).
        var exact = true
        var rejected = false
    }

    /// Returns the compensating writes (already sent to the client).
    private func upload(_ outbox: ConnectionOutbox, _ id: UInt64, _ changesets: [UploadChangeset]) throws -> [CompensatingWrite] {
        var s = try session(outbox, id)
        // The durable acknowledgement, not the session's copy: another session of the same file
        // (a reconnect racing an upload still in flight on the old connection) may have moved
        // it. Nothing is applied twice.
        if let record = try storage.clientFile(s.clientFile) { s.acknowledged = max(s.acknowledged, record.acknowledgedClientVersion) }
        let newVersion = version + 1
        var entries: [ObjectKey: UploadEntry] = [:]
        var compensating: [CompensatingWrite] = []
        var lastClientVersion = s.acknowledged
        let user = outbox.user
        var validators: [String: WriteValidator] = [:]
        var advanced = false
        /// Objects of changesets the server had already acknowledged: the client uploads them
        /// again only when it missed the acknowledgement (its session ended first), so it may
        /// also have missed their echoes and reverts: it gets the objects' current state.
        var resend: Set<ObjectKey> = []

        // Reads and writes of one upload are one SQLite transaction: one lock, one fsync.
        try storage.transaction {
            for upload in changesets where upload.clientVersion <= s.acknowledged {
                guard let known = try? ChangesetCodec.decode(upload.changeset) else { continue }
                for i in known.instructions { resend.insert(ObjectKey(table: i.table, key: i.key)) }
            }
            for upload in changesets where upload.clientVersion > s.acknowledged {
                lastClientVersion = max(lastClientVersion, upload.clientVersion)
                let changeset: Changeset
                do { changeset = try ChangesetCodec.decode(upload.changeset) } catch {
                    throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): a malformed changeset (\(error))", .protocolViolation)
                }
                let stamp = UploadClock.stamp(changeset.timestamp, fileIdent: s.clientFile)
                let base = upload.lastIntegratedServerVersion
                // Each run of instructions on one object is judged as a whole write.
                let instructions = changeset.instructions
                var i = 0
                while i < instructions.count {
                    let first = instructions[i]
                    var end = i + 1
                    while end < instructions.count, instructions[end].key == first.key, instructions[end].table == first.table { end += 1 }
                    defer { i = end }
                    guard let os = schema.objectSchema(named: first.table) else {
                        throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): no object type '\(first.table)' in the app's schema", .protocolViolation)
                    }
                    let k = ObjectKey(table: first.table, key: first.key)
                    if entries[k] == nil {
                        let stored = try storage.object(k, schema: os) ?? StoredObject(object: nil)
                        entries[k] = UploadEntry(stored: stored, before: stored.object)
                    }
                    let start = entries[k]!.stored
                    // A create of a key another user's object already holds, one this user may
                    // not read: refused with its own reason, and nothing of that object is sent
                    // (primary keys are global per class; a guessed key must not destroy or
                    // reveal another user's object).
                    if case .create = first, let existing = start.object,
                       !s.view.mayRead(existing.values, of: os, app: app) {
                        compensating.append(.keyTaken(objectType: os.name, primaryKey: first.key))
                        entries[k]!.rejected = true
                        entries[k]!.exact = false
                        continue
                    }
                    var next = start
                    var didChange = false
                    var asIs = (start.object?.versions.max() ?? 0) <= base
                    for n in i..<end {
                        do {
                            let outcome = try ObjectMerge.apply(instructions[n], to: &next.object, schema: os, stamp: stamp, base: base,
                                                                version: newVersion, lists: &next.lists)
                            didChange = outcome.changed || didChange
                            asIs = asIs && outcome == .applied
                        } catch let e as FerryError {
                            throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): \(e.message)", .protocolViolation)
                        }
                    }
                    guard didChange else {
                        entries[k]!.exact = false
                        continue
                    }
                    let validator: WriteValidator
                    if let v = validators[os.name] { validator = v } else {
                        validator = WriteValidator(objectSchema: os, rules: app.rules(for: os.name) ?? CollectionRules(roles: []),
                                                   subscriptions: s.view.subscriptions(of: os.name))
                        validators[os.name] = validator
                    }
                    if let cw = validator.check(user: user, before: start.object?.values, after: next.object?.values) {
                        compensating.append(cw)
                        entries[k]!.rejected = true
                        continue
                    }
                    // A tombstone keeps the object's last values: who may learn of the erase.
                    next.erasedState = next.object == nil ? (start.object ?? start.erasedState) : nil
                    entries[k]!.stored = next
                    entries[k]!.changed = true
                    if !asIs { entries[k]!.exact = false }
                }
            }
            var toStore: [ObjectKey: StoredObject] = [:]
            for (k, e) in entries where e.changed { toStore[k] = e.stored }
            try storage.commit(version: toStore.isEmpty ? version : newVersion, objects: toStore,
                               clientFile: s.clientFile, clientVersion: lastClientVersion)
            advanced = !toStore.isEmpty
        }
        // Only now is it durable.
        if advanced { version = newVersion }
        s.acknowledged = lastClientVersion
        sessions[s.key] = s
        for (key, other) in sessions where other.clientFile == s.clientFile && key != s.key {
            sessions[key]?.acknowledged = max(other.acknowledged, lastClientVersion)
        }

        for cw in compensating {
            logger.warning("\"\(cw.objectType)\": { \"\(cw.primaryKey.keyText)\": \"\(cw.reason.replacingAll("\"", with: "\\\""))\" }")
        }
        // Fan out: every session with a query gets what entered or changed in its view and
        // erases of what left it. The uploader also gets its reverts, and the merged state of
        // every object it touched unless it already has exactly that.
        for (key, other) in sessions where other.hasQuery || key == s.key {
            let isOrigin = key == s.key
            var batch = DownloadBatch(session: other.id)
            for (k, e) in entries {
                guard let os = schema.objectSchema(named: k.table) else { continue }
                let current = e.stored.object
                if e.changed && !(isOrigin && e.exact) {
                    if let current, other.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
                    else if let b = e.before, other.view.contains(b.values, of: os) { batch.add(.erase(table: k.table, key: k.key)) }
                    else if isOrigin { batch.add(.erase(table: k.table, key: k.key)) }
                } else if isOrigin && (e.rejected || !e.changed) {
                    // A revert, or a write the merge did not take: the server's object when
                    // the user may see it (never another user's data), else an erase.
                    if let current, other.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
                    else { batch.add(.erase(table: k.table, key: k.key)) }
                }
            }
            if isOrigin {
                for k in resend where entries[k] == nil {
                    guard let os = schema.objectSchema(named: k.table) else { continue }
                    if let current = try storage.object(k, schema: os)?.object, other.view.contains(current.values, of: os) {
                        batch.add(current.fullState(os))
                    } else {
                        batch.add(.erase(table: k.table, key: k.key))
                    }
                }
            }
            guard isOrigin || !batch.isEmpty else { continue }
            batch.finish(serverVersion: version, acknowledged: other.acknowledged, subscriptionVersion: other.subscriptionVersion, to: other.outbox)
        }
        if !compensating.isEmpty {
            outbox.send(.error(ProtocolError(session: id, code: SyncErrorText.compensatingWriteCode, message: SyncErrorText.compensatingWriteMessage,
                                             tryAgain: true, action: .warning, compensatingWrites: compensating)))
        }
        return compensating
    }
}

/// Why a session ends with an error.
struct SessionFailure: Error {
    let session: UInt64
    let code: Int32
    let message: String
    let action: ErrorAction
    init(_ session: UInt64, _ code: Int32, _ message: String, _ action: ErrorAction) {
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
