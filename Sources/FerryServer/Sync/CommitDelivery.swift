import FerryCore
import FerrySyncStorage

/// What a commit sends: to every other session it concerns, from memory, when the session is
/// idle and exactly at the version before it (`fanOut`; any other is caught up from storage,
/// `SessionCatchUp`), and to the uploader its answer: the acknowledgement, its reverts and the
/// merged state of what it wrote (`respond`). The end of the upload pipeline on this node.
/// Runs isolated to the hub, whose state it reads and moves; the hub holds the state, this type
/// the logic.
enum CommitDelivery {
    /// Fans out one group's commits in version order (`GroupCommit` calls it after the group's
    /// transaction committed, before answering its uploaders).
    static func fanOut(_ hub: isolated SyncHub, _ group: [UploadPipeline.Committed]) {
        hub.recentCommits.withLock { recent in
            for c in group { recent.record(before: c.before, after: c.after, written: c.outcome.entries.keys) }
        }
        for committed in group {
            hub.knownHead = max(hub.knownHead, committed.after)
            if committed.after > committed.before { fanOut(hub, committed, origin: committed.origin) }
        }
    }

    /// Sends a commit of this node from memory to every other session with a query that is
    /// idle and exactly at the version before it: what entered or changed in its view, and
    /// erases of what left it. Any other session is caught up from storage.
    ///
    /// Only the sessions the fan-out index names are visited; the others follow the chain
    /// (`SessionRegistry`). Sessions that get the same instructions share their encoding.
    static func fanOut(_ hub: isolated SyncHub, _ committed: UploadPipeline.Committed, origin: SessionKey) {
        let (before, after) = (committed.before, committed.after)
        hub.sessions.breakChain(at: before)
        // The uploader is answered by `respond`, from the version before its commit: it owes
        // this commit until then.
        hub.sessions.skip(origin, owing: after)
        let changed = committed.outcome.entries.compactMap { $0.value.changed ? ($0.key, $0.value) : nil }
        var concerned: Set<SessionKey> = []
        for (k, e) in changed {
            concerned.formUnion(hub.sessions.candidates(table: k.table, before: e.before?.values, after: e.stored.object?.values))
        }
        concerned.remove(origin)
        var sent: [SessionKey] = []
        var skippedIdle: [SessionKey] = []
        var receivers: [FanOutEncoding.Receiver] = []
        for key in concerned {
            guard let other = hub.sessions[key] else { continue }
            // Others are caught up from storage once no upload is in flight (`SessionCatchUp.headMoved`); so
            // is a session whose client has not read what it was sent (`fanOutWindowBytes`).
            switch DeliveryRules.fanOut(other.delivery, before: before, queuedBytes: other.outbox.queuedBytes,
                                        windowBytes: hub.limits.fanOutWindowBytes) {
            case .ignore:
                continue
            case .skip(let idle):
                hub.sessions.skip(key, owing: after)
                if idle { skippedIdle.append(key) }
                continue
            case .send:
                break
            }
            sent.append(key)
            receivers.append(FanOutEncoding.Receiver(session: other.id, view: other.view, acknowledged: other.acknowledged,
                                            subscriptionVersion: other.subscriptionVersion, outbox: other.outbox))
        }
        FanOutEncoding(changed: changed, schema: hub.schema).send(after, to: receivers)
        hub.sessions.advanceChain(to: after)
        for key in sent { hub.sessions[key]?.delivered = after }
        // An idle session that was not at `before`: ahead (a catch-up read past the chain) it
        // joins the chain once the chain reaches it; behind, it is caught up now, not when
        // this node's uploads pause, unless its own upload awaits its answer (`respond`
        // catches it up after that).
        for key in skippedIdle {
            guard let s = hub.sessions[key] else { continue }
            switch DeliveryRules.afterSkip(s.delivery, uploading: hub.uploading[key] != nil) {
            case .leave: break
            case .followChain: hub.sessions.reconsiderChain(key)
            case .catchUp: SessionCatchUp.startCatchUp(hub, key)
            }
        }
    }

    /// The uploader's answer: the acknowledgement, its reverts, and the merged state of every
    /// object it touched unless it already has exactly that. From memory when the session is
    /// exactly at the version before the commit; else (another node committed meanwhile, or a
    /// catch-up is running) from storage, after the session's turn, so it never skips a
    /// version.
    static func respond(_ hub: isolated SyncHub, to key: SessionKey, _ committed: UploadPipeline.Committed) async {
        guard await hub.acquire(key) else { return }
        defer { SessionCatchUp.releaseAndCatchUp(hub, key) }
        guard let s = hub.sessions[key], !s.outbox.isClosed else { return }
        var batch = DownloadBatch(session: s.id)
        let entries = committed.outcome.entries
        var target = committed.after
        var extras: [ObjectKey] = []
        let inMemory = DeliveryRules.answersFromMemory(s.delivery, before: committed.before)
        if inMemory {
            for (k, e) in entries {
                guard let os = hub.schema.objectSchema(named: k.table) else { continue }
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
            target = max(hub.knownHead, committed.after)
            do {
                try await SessionCatchUp.readChanges(hub, since: s.delivered, through: target, view: s.view, classes: s.view.classes, into: &batch)
                for (k, e) in entries where e.changed {
                    if !s.view.classes.contains(k.table) { batch.add(.erase(table: k.table, key: k.key)) }
                }
            } catch {
                s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot read the uploader's catch-up: \(error)")
                hub.closeForStoreFailure(s.outbox)
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
            guard let os = hub.schema.objectSchema(named: k.table) else { continue }
            let current: StampedObject?
            if let e = entries[k], inMemory { current = e.stored.object } else {
                do { current = try await hub.storage.object(k, schema: os)?.object } catch {
                    s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot read \(k.table) \(k.key) for the uploader: \(error)")
                    hub.closeForStoreFailure(s.outbox)
                    return
                }
            }
            if let current, s.view.contains(current.values, of: os) { batch.add(current.fullState(os)) }
            else { batch.add(.erase(table: k.table, key: k.key)) }
        }
        guard let now = hub.sessions[key] else { return }
        if now.hasQuery { hub.sessions[key]?.delivered = max(now.delivered, target) }
        batch.finish(serverVersion: now.hasQuery ? max(now.delivered, target) : now.delivered, acknowledged: now.acknowledged,
                     subscriptionVersion: now.subscriptionVersion, to: now.outbox)
    }
}
