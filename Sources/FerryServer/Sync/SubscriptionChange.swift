import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// A session's QUERY (a new subscription set): the new view is evaluated off the hub
/// (`ViewEvaluation`), installed between its passes, its bootstrap sent, and what was committed
/// meanwhile sent after it; a set the server refuses is answered with error 226 and the session
/// keeps its previous view. Holds the session's turn throughout. Runs isolated to the hub, whose
/// state it reads and moves; the hub holds the state, this type the logic.
enum SubscriptionChange {
    /// Returns the rejection message of a bad subscription set. Holds the session's turn: no
    /// other download reaches the session until the new view's bootstrap is sent.
    static func query(_ hub: isolated SyncHub, _ outbox: ConnectionOutbox, _ id: UInt64, _ setVersion: UInt64, _ subscriptions: [Subscription]) async throws -> String? {
        let key = SessionKey(connection: outbox.id, session: id)
        _ = try hub.session(outbox, id)
        guard await hub.acquire(key) else { return nil }
        defer { SessionCatchUp.releaseAndCatchUp(hub, key) }
        guard let started = hub.sessions[key] else { return nil }
        let evaluation = ViewEvaluation(session: id, subscriptions: subscriptions, setVersion: setVersion, user: outbox.user, app: hub.app, schema: hub.schema,
                                        limits: hub.limits, oldView: started.view, since: started.delivered,
                                        setChanged: setVersion != started.subscriptionVersion, outbox: outbox)
        let outcome: ViewEvaluation.Outcome
        do {
            outcome = try await evaluation.run(storage: hub.storage) { newView, snapshotVersion in
                try await install(hub, newView, at: snapshotVersion, for: key, started: started, setVersion: setVersion, subscriptions: subscriptions)
            }
        } catch let gone as ViewEvaluation.ConnectionGone {
            // A bootstrap cut short: the stored set goes back to the one the device's data
            // reflects (it asks for the new set again when it reconnects).
            if gone.afterInstall { await putBack(hub, started) }
            return nil
        }
        // Meanwhile the connection may have closed, the session unbound or sync stopped: then
        // nobody wants this answer.
        guard hub.syncEnabled, hub.sessions[key] != nil, !outbox.isClosed else { return nil }
        switch outcome {
        case .rejected(let message):
            // The set is in error; the session keeps syncing the previous set.
            outbox.logger.info("client file \(started.clientFile): subscription set \(setVersion) rejected: \(message)")
            outbox.send(.error(ProtocolError(session: id, code: ProtocolError.Code.badQuery, message: message, tryAgain: false, action: .warning)))
            hub.sessions[key]?.hasQuery = true
            // Commits of its previous view were not kept for it while it had no query: it
            // owes a catch-up to the head before it may follow the chain.
            if let s = hub.sessions[key] { hub.sessions[key]?.lastSkipped = max(s.lastSkipped, hub.knownHead) }
            return message
        case .sent(let newView, let snapshotVersion):
            // What was committed after the snapshot (on any node): the current state of each
            // such object in the new view, or its erase.
            let target = max(hub.knownHead, snapshotVersion)
            guard target > snapshotVersion else { return nil }
            var batch = DownloadBatch(session: id)
            try await SessionCatchUp.readChanges(hub, since: snapshotVersion, through: target, view: newView, classes: Array(Set(newView.classes).union(started.view.classes)),
                                  into: &batch)
            guard let s = hub.sessions[key], !outbox.isClosed else { return nil }
            hub.sessions[key]?.delivered = target
            if !batch.isEmpty { batch.finish(serverVersion: target, acknowledged: s.acknowledged, subscriptionVersion: setVersion, to: outbox) }
            return nil
        }
    }

    /// Installs a new view between the passes of its evaluation, before any of its bootstrap
    /// is sent; returns the acknowledged client version the bootstrap carries, or nil when
    /// nobody wants it any more. The stored set is the one whose bootstrap the client was
    /// sent: a device binding again takes it as what its data reflects. So it is saved just
    /// before the bootstrap goes out, and put back if the connection closed meanwhile.
    static func install(_ hub: isolated SyncHub, _ newView: SessionView, at snapshotVersion: UInt64, for key: SessionKey, started: ServerSession,
                         setVersion: UInt64, subscriptions: [Subscription]) async throws -> UInt64? {
        guard hub.syncEnabled, hub.sessions[key] != nil, !started.outbox.isClosed else { return nil }
        let acknowledged = try await hub.storage.clientFile(started.clientFile)?.acknowledgedClientVersion ?? 0
        guard hub.sessions[key] != nil, !started.outbox.isClosed else { return nil }
        try await hub.storage.saveSubscriptions(clientFile: started.clientFile, version: setVersion, subscriptions: subscriptions)
        guard var s = hub.sessions[key], !started.outbox.isClosed else {
            await putBack(hub, started)
            return nil
        }
        s.acknowledged = max(s.acknowledged, acknowledged)
        s.subscriptions = subscriptions
        s.view = newView
        s.hasQuery = true
        s.subscriptionVersion = setVersion
        s.delivered = snapshotVersion
        s.busy = true
        hub.sessions[key] = s
        hub.sessions.reindex(key)
        return s.acknowledged
    }

    /// Puts back the subscription set a device's data reflects after a bootstrap was cut short.
    /// If the store refuses, the client file is forgotten instead: its next bind is a client
    /// reset, where taking the new set as complete would skip what entered its view (issue 22,
    /// point 10). If even that fails, the cost is logged.
    static func putBack(_ hub: isolated SyncHub, _ started: ServerSession) async {
        do {
            try await hub.storage.saveSubscriptions(clientFile: started.clientFile, version: started.subscriptionVersion, subscriptions: started.subscriptions)
        } catch {
            hub.logger.error("client file \(started.clientFile): cannot put back subscription set \(started.subscriptionVersion) after a bootstrap was cut short (\(error)); forgetting the file, so the device resets")
            do { try await hub.storage.forgetClientFile(started.clientFile) } catch {
                hub.logger.critical("client file \(started.clientFile): cannot forget it either (\(error)); its next bind takes the new subscription set as complete and may miss objects that entered its view until it subscribes again")
            }
        }
    }
}
