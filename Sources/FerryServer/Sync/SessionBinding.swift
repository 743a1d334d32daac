import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// A session's BIND: a new client file gets its identity (IDENT); a known one is bound when the
/// bind policy (`BindRules`, FerryCore) says so, or refused with the reset it calls for. The
/// session starts with the view its data reflects (the last set the server completed for it).
/// Runs isolated to the hub, whose state it moves; the hub holds the state, this type the logic.
enum SessionBinding {
    static func bind(_ hub: isolated SyncHub, _ outbox: ConnectionOutbox, _ id: UInt64, _ ident: UInt64, _ salt: UInt64, _ lastServerVersion: UInt64,
                     answeredThrough: UInt64? = nil) async throws {
        let key = SessionKey(connection: outbox.id, session: id)
        guard hub.sessions[key] == nil else { throw SessionFailure(id, ProtocolError.Code.sessionAlreadyBound, "session \(id) is already bound on this connection", .protocolViolation) }
        guard hub.sessions.keys(onConnection: outbox.id).count < hub.limits.maxSessionsPerConnection else {
            throw SessionFailure(id, ProtocolError.Code.tooManySessions, "the connection has \(hub.limits.maxSessionsPerConnection) sessions bound, the most allowed; close a synced database first", .applicationBug)
        }
        let record: ClientFileRecord
        var bindVersion = lastServerVersion
        if ident == 0 {
            // Bounded per user: a device that binds new files in a loop only churns its own.
            if try await hub.storage.clientFileCount(userId: outbox.userId) >= hub.limits.maxClientFilesPerUser {
                try await hub.storage.forgetLeastRecentClientFile(userId: outbox.userId)
            }
            record = try await hub.storage.newClientFile(userId: outbox.userId)
            bindVersion = 0
            outbox.send(.ident(session: id, clientFileIdent: record.ident, clientFileSalt: record.salt))
        } else {
            // The facts the policy (`BindRules`) decides on: the stored file, and the head as
            // storage has it when the device claims more than this node heard of.
            let stored = try await hub.storage.clientFile(ident)
            if lastServerVersion > hub.knownHead { hub.knownHead = max(hub.knownHead, try await hub.storage.syncState().headVersion) }
            let now = Int(WallClock.system.secondsSinceEpoch())
            let known = stored.map { BindRules.KnownFile(saltMatches: $0.salt == salt, sameUser: $0.userId == outbox.userId, lastSeen: $0.lastSeen) }
            switch BindRules.decide(ident: ident, file: known, lastServerVersion: lastServerVersion, head: hub.knownHead,
                                    now: now, maxOfflineDays: hub.app.sync.clientMaxOfflineDays) {
            case .bind:
                break
            case .refuse(let message):
                throw SessionFailure(id, ProtocolError.Code.badClientFile, message, .protocolViolation)
            case .reset(let reason, let message):
                if reason == .maxOfflineTime { try await hub.storage.forgetClientFile(ident) }
                throw SessionFailure(id, ProtocolError.Code.badClientFile, message, BindRules.resetAction(recoveryDisabled: hub.app.sync.recoveryDisabled),
                                     trigger: reason)
            }
            guard let r = stored else { return }  // not reached: a file the server lacks is a reset
            // Stored only once checked: a version past the head would pin what the server keeps
            // for the file (issue 22, point 8).
            try await hub.storage.clientFileBound(ident, at: now, serverVersion: lastServerVersion)
            record = r
        }
        guard !outbox.isClosed, hub.sessions[key] == nil else { return }
        var s = ServerSession(outbox: outbox, id: id, clientFile: record.ident, view: .empty(user: outbox.user), delivered: bindVersion)
        s.acknowledged = record.acknowledgedClientVersion
        // The view the client's data reflects: the last set the server completed for it.
        if case .success(let v) = SessionView.make(record.subscriptions, user: outbox.user, app: hub.app, schema: hub.schema) { s.view = v }
        s.subscriptionVersion = record.subscriptionVersion
        s.subscriptions = record.subscriptions
        hub.sessions[key] = s
        if outbox.sendsWriteRules { outbox.send(.writeRules(session: id, rules: hub.app.publishedWriteRules(for: outbox.user, schema: hub.schema))) }
        hub.telemetry.sessionBound(outbox, session: id, clientFile: record.ident, newFile: ident == 0, serverVersion: bindVersion)
        if ident != 0, let answeredThrough {
            var ledger = RefusalLedger(), damaged = false
            do { ledger = try record.refusals } catch {
                outbox.logger.error("connection \(outbox.id) session \(id): the refusals kept for client file \(record.ident) are damaged (\(error)): they are dropped, and the device is not told again of those it missed")
                damaged = true
            }
            let (writes, kept) = ledger.atBind(answeredThrough: answeredThrough, acknowledged: record.acknowledgedClientVersion)
            try await repeatRefusals(hub, s, record, ledger, writes, answeredThrough: answeredThrough)
            // The store drops a damaged ledger as it forgets (`RefusalLedger.forgettingAnswered`).
            if damaged || kept != ledger { try await hub.storage.forgetAnsweredRefusals(clientFile: record.ident, answeredThrough: answeredThrough) }
        }
    }

    /// Sends a device that just bound the refusals whose answer it did not get
    /// (`RefusalLedger`), as `respond` sends a refusal: a DOWNLOAD with each refused object as
    /// the server has it (or its erase, outside the view), which carries the acknowledgement
    /// and lets the device capture what the revert takes, then the ERROR 231 naming them.
    /// Before the session's first QUERY, so at the version it bound with, as an upload's answer
    /// before a QUERY is.
    static func repeatRefusals(_ hub: isolated SyncHub, _ s: ServerSession, _ record: ClientFileRecord, _ ledger: RefusalLedger,
                               _ writes: [CompensatingWrite], answeredThrough: UInt64) async throws {
        if ledger.lostRefusals(answeredThrough: answeredThrough) {
            s.outbox.logger.warning("""
                connection \(s.outbox.id) session \(s.id): client file \(record.ident) missed refusals older than the \(RefusalLedger.maxWrites) \
                the server keeps; they are not sent again
                """)
        }
        guard !writes.isEmpty else { return }
        // Read in one go (one round trip on PostgreSQL, however many: at most the ledger's bound).
        let keys = writes.compactMap { w in hub.schema.objectSchema(named: w.objectType).map { _ in ObjectKey(table: w.objectType, key: w.primaryKey) } }
        let stored = try await hub.storage.objects(keys, schema: hub.schema)
        var batch = DownloadBatch(session: s.id)
        for k in keys {
            guard let os = hub.schema.objectSchema(named: k.table) else { continue }
            if let current = stored[k]?.object, s.view.contains(current.values, of: os) {
                batch.add(current.fullState(os))
            } else {
                batch.add(.erase(table: k.table, key: k.key))
            }
        }
        guard let now = hub.sessions[s.key], !now.outbox.isClosed else { return }
        batch.finish(serverVersion: now.delivered, acknowledged: now.acknowledged, subscriptionVersion: now.subscriptionVersion, to: now.outbox)
        now.outbox.send(.error(ProtocolError(session: s.id, code: ProtocolError.Code.compensatingWrite, message: SyncErrorText.compensatingWriteMessage,
                                             tryAgain: true, action: .warning, compensatingWrites: writes)))
        s.outbox.logger.info("connection \(s.outbox.id) session \(s.id): sent client file \(record.ident) \(writes.count) refusals again (answered through \(answeredThrough))")
    }
}
