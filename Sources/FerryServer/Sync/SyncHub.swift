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
    /// False between an admin's terminate and enable: nothing syncs.
    private(set) var syncEnabled = true
    private var connections: [UInt64: ConnectionOutbox] = [:]
    private var sessions: [SessionKey: ServerSession] = [:]
    private var version: UInt64
    private var nextConnection: UInt64 = 1
    /// Download messages are cut at about this many changeset bytes.
    static let downloadChunkBytes = 1 << 20
    /// The protocol errors (docs/protocol.md).
    static let badQueryCode: Int32 = 226
    static let badClientFileCode: Int32 = 208
    static let badChangesetCode: Int32 = 212

    static let syncDisabledCode: Int32 = 240

    init(app: AppConfiguration, storage: SyncStorage, logger: Logger, events: ServerEventLog) throws {
        self.events = events
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

    /// Handles one decoded message from a connection.
    func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async {
        guard syncEnabled else { return }
        do {
            switch message {
            case let .bind(session, _, ident, salt, lastServerVersion):
                try bind(outbox, session, ident, salt, lastServerVersion)
            case let .query(session, v, subscriptions):
                if let e = try query(outbox, session, v, subscriptions) {
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
                outbox.send(.error(ProtocolError(session: 0, code: 201, message: "the client sent a server-only message", tryAgain: false, action: .protocolViolation)))
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

    private func bind(_ outbox: ConnectionOutbox, _ id: UInt64, _ ident: UInt64, _ salt: UInt64, _ lastServerVersion: UInt64) throws {
        let key = SessionKey(connection: outbox.id, session: id)
        guard sessions[key] == nil else { throw SessionFailure(id, 204, "session \(id) is already bound on this connection", .protocolViolation) }
        let record: ClientFileRecord
        var bindVersion = lastServerVersion
        if ident == 0 {
            record = try storage.newClientFile(userId: outbox.userId)
            bindVersion = 0
            outbox.send(.ident(session: id, clientFileIdent: record.ident, clientFileSalt: record.salt))
        } else {
            guard let r = try storage.clientFile(ident), r.salt == salt else {
                throw SessionFailure(id, Self.badClientFileCode, "the server does not know client file \(ident): the device must reset", .clientReset)
            }
            guard r.userId == outbox.userId else {
                throw SessionFailure(id, Self.badClientFileCode, "client file \(ident) belongs to another user", .protocolViolation)
            }
            guard lastServerVersion <= version else {
                throw SessionFailure(id, Self.badClientFileCode, "the client has server version \(lastServerVersion), newer than the server's \(version): the device must reset", .clientReset)
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
    private func query(_ outbox: ConnectionOutbox, _ id: UInt64, _ setVersion: UInt64, _ subscriptions: [Subscription]) throws -> String? {
        var s = try session(outbox, id)
        let newView: SessionView
        switch SessionView.make(subscriptions, user: outbox.user, app: app, schema: schema) {
        case .failure(let e):
            // The set is in error; the session keeps syncing the previous set.
            logger.info("client file \(s.clientFile): subscription set \(setVersion) rejected: \(e.message)")
            outbox.send(.error(ProtocolError(session: id, code: Self.badQueryCode, message: e.message, tryAgain: false, action: .warning)))
            if !s.hasQuery { s.hasQuery = true; sessions[s.key] = s }
            return e.message
        case .success(let v): newView = v
        }
        let oldView = s.view
        let since = s.bindVersion
        var batch = DownloadBatch(session: id, hub: self)
        // Everything of a subscribed or previously subscribed class: state for what is in the
        // new view and new to the client (entered, or changed since it last synced), an erase
        // for what left it.
        let classes = Set(newView.classes).union(oldView.classes)
        for name in classes.sorted() {
            guard let os = schema.objectSchema(named: name) else { continue }
            if since == 0 || setVersion != s.subscriptionVersion {
                try storage.forEachObject(schema: os) { key, o in
                    let inNew = newView.contains(o.values, of: os)
                    let inOld = since > 0 && oldView.contains(o.values, of: os)
                    if inNew && !inOld { batch.add(o.fullState(os)) }
                    else if !inNew && inOld { batch.add(.erase(table: os.name, key: key)) }
                }
            }
            if since > 0 {
                // Changes since the client's last download: current state if in view, else an
                // erase (the client ignores erases of objects it does not have).
                try storage.changes(since: since, schema: os) { key, o, _ in
                    if let o, newView.contains(o.values, of: os) { batch.add(o.fullState(os)) }
                    else { batch.add(.erase(table: os.name, key: key)) }
                }
            }
        }
        try storage.saveSubscriptions(clientFile: s.clientFile, version: setVersion, subscriptions: subscriptions)
        s.view = newView
        s.hasQuery = true
        s.subscriptionVersion = setVersion
        s.bindVersion = version
        sessions[s.key] = s
        batch.finish(serverVersion: version, acknowledged: s.acknowledged, subscriptionVersion: setVersion, to: outbox)
        return nil
    }

    // MARK: UPLOAD

    /// Returns the compensating writes (already sent to the client).
    private func upload(_ outbox: ConnectionOutbox, _ id: UInt64, _ changesets: [UploadChangeset]) throws -> [CompensatingWrite] {
        var s = try session(outbox, id)
        let newVersion = version + 1
        var working: [ObjectKey: StoredObject] = [:]
        var before: [ObjectKey: StampedObject?] = [:]
        var changed: Set<ObjectKey> = []
        var reverted: [ObjectKey] = []
        /// Every object the upload touched: the uploader gets their merged state back even when
        /// the merge kept the server's values (its write lost), so it converges.
        var touched: Set<ObjectKey> = []
        /// Objects where every instruction applied as the client made it, with no concurrent
        /// server change: the uploader already has exactly the merged state (no echo needed).
        var exact: Set<ObjectKey> = []
        var inexact: Set<ObjectKey> = []
        var compensating: [CompensatingWrite] = []
        var lastClientVersion = s.acknowledged

        func load(_ key: ObjectKey, _ os: ObjectSchema) throws -> StoredObject {
            if let w = working[key] { return w }
            let stored = try storage.object(key, schema: os) ?? StoredObject(object: nil)
            working[key] = stored
            if before[key] == nil { before[key] = .some(stored.object) }
            return stored
        }

        for upload in changesets where upload.clientVersion > s.acknowledged {
            lastClientVersion = max(lastClientVersion, upload.clientVersion)
            let changeset: Changeset
            do { changeset = try ChangesetCodec.decode(upload.changeset) } catch {
                throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): a malformed changeset (\(error))", .protocolViolation)
            }
            let stamp = Stamp(timestamp: changeset.timestamp, fileIdent: s.clientFile)
            // Instructions grouped by object, in order: each object's write is judged as a whole.
            var order: [ObjectKey] = []
            var byObject: [ObjectKey: [Instruction]] = [:]
            for i in changeset.instructions {
                let k = ObjectKey(table: i.table, key: i.key)
                if byObject[k] == nil { order.append(k) }
                byObject[k, default: []].append(i)
            }
            for k in order {
                touched.insert(k)
                guard let os = schema.objectSchema(named: k.table) else {
                    throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): no object type '\(k.table)' in the app's schema", .protocolViolation)
                }
                let start = try load(k, os)
                var next = start
                var didChange = false
                var asIs = (start.object?.versions.max() ?? 0) <= upload.lastIntegratedServerVersion
                for i in byObject[k] ?? [] {
                    do {
                        let outcome = try ObjectMerge.apply(i, to: &next.object, schema: os, stamp: stamp, base: upload.lastIntegratedServerVersion,
                                                            version: newVersion, lists: &next.lists)
                        didChange = outcome.changed || didChange
                        asIs = asIs && outcome == .applied
                    } catch let e as FerryError {
                        throw SessionFailure(id, Self.badChangesetCode, "client version \(upload.clientVersion): \(e.message)", .protocolViolation)
                    }
                }
                guard didChange else { exact.remove(k); inexact.insert(k); continue }
                let rules = app.rules(for: os.name) ?? CollectionRules(roles: [])
                let validator = WriteValidator(objectSchema: os, rules: rules, subscriptions: s.view.subscriptions(of: os.name))
                if let cw = validator.check(user: outbox.user, before: start.object?.values, after: next.object?.values) {
                    compensating.append(cw)
                    reverted.append(k)
                    continue
                }
                working[k] = next
                changed.insert(k)
                if asIs && !inexact.contains(k) { exact.insert(k) } else { exact.remove(k); inexact.insert(k) }
            }
        }
        let toStore = working.filter { changed.contains($0.key) }
        try storage.commit(version: toStore.isEmpty ? version : newVersion, objects: toStore,
                           clientFile: s.clientFile, clientVersion: lastClientVersion)
        if !toStore.isEmpty { version = newVersion }
        s.acknowledged = lastClientVersion
        sessions[s.key] = s

        for cw in compensating {
            logger.warning("\"\(cw.objectType)\": { \"\(cw.primaryKey.keyText)\": \"\(cw.reason.replacingAll("\"", with: "\\\""))\" }")
        }
        // Fan out: every session with a query gets what entered or changed in its view and
        // erases of what left it; the uploader also gets its reverts.
        for (key, other) in sessions where other.hasQuery || key == s.key {
            let isOrigin = key == s.key
            var batch = DownloadBatch(session: other.id, hub: self)
            for k in changed where !(isOrigin && exact.contains(k)) {
                guard let os = schema.objectSchema(named: k.table) else { continue }
                let after = working[k]?.object
                if let after, other.view.contains(after.values, of: os) { batch.add(after.fullState(os)) }
                else if let b = before[k] ?? nil, other.view.contains(b.values, of: os) { batch.add(.erase(table: k.table, key: k.key)) }
                else if isOrigin && after == nil { batch.add(.erase(table: k.table, key: k.key)) }
            }
            if isOrigin {
                let rejected = Set(reverted)
                for k in touched where !changed.contains(k) && !rejected.contains(k) {
                    guard let os = schema.objectSchema(named: k.table) else { continue }
                    if let current = working[k]?.object {
                        if other.view.contains(current.values, of: os) { batch.add(current.fullState(os)) } else { batch.add(.erase(table: k.table, key: k.key)) }
                    } else {
                        batch.add(.erase(table: k.table, key: k.key))
                    }
                }
                for k in reverted {
                    guard let os = schema.objectSchema(named: k.table) else { continue }
                    // The revert restores what the user may see: the server's object when it
                    // is in the session's view, otherwise nothing (never another user's data).
                    if let current = before[k] ?? nil, other.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
                    else { batch.add(.erase(table: k.table, key: k.key)) }
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
