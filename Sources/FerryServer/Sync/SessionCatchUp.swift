import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// Catching sessions up from storage (the hub's job that is not a fan-out from memory): when the
/// head moved past sessions that are not on this node's chain, each is sent what changed in its
/// view, alone or in a group that reads each class once (`CatchUpGroup`). Runs isolated to the
/// hub, whose state (`SessionRegistry`, `knownHead`) it reads and moves; the hub holds the
/// state, this type the logic.
enum SessionCatchUp {
    /// Catches up every session of this node that is behind `head`. Sessions that follow the
    /// chain of this node's fanned-out commits are at its head; when the head is newer (a
    /// commit of another node), they leave the chain and are caught up like the rest.
    static func headMoved(_ hub: isolated SyncHub, to head: UInt64) {
        hub.knownHead = max(hub.knownHead, head)
        guard hub.uploadsInFlight == 0 else { return }
        hub.sessions.breakChain(at: hub.knownHead)
        var behind: [SessionKey] = []
        for key in hub.sessions.detachedKeys {
            guard let s = hub.sessions[key], DeliveryRules.needsCatchUp(s.delivery, head: hub.knownHead) else { continue }
            behind.append(key)
        }
        guard behind.count > 1 else {
            if let key = behind.first { startCatchUp(hub, key) }
            return
        }
        for key in behind { hub.sessions[key]?.busy = true }
        Task { await catchUp(hub, group: behind) }
    }

    /// Catches up many sessions together (`CatchUpGroup`: each class read once for all of
    /// them), round after round until each has reached the newest head this node knows of.
    /// Holds the members' turns; a member another task is waiting for (its upload's answer, a
    /// QUERY) leaves the group after its round, and that task catches it up when it is done.
    static func catchUp(_ hub: isolated SyncHub, group keys: [SessionKey]) async {
        var keys = keys
        while true {
            var members: [CatchUpGroup.Member] = []
            var staying: [SessionKey] = []
            for key in keys {
                guard let s = hub.sessions[key], s.hasQuery, s.delivered < hub.knownHead, !s.outbox.isClosed, !hub.sessions.hasWaiters(key) else {
                    hub.sessions.release(key)
                    continue
                }
                members.append(CatchUpGroup.Member(session: s.id, view: s.view, delivered: s.delivered))
                staying.append(key)
            }
            keys = staying
            guard !members.isEmpty else { return }
            let target = hub.knownHead
            let downloads: [[[UInt8]]]
            do {
                downloads = try await CatchUpGroup(members: members, schema: hub.schema, app: hub.app).read(from: hub.storage, through: target)
            } catch {
                let id = CorrelationId.make()
                hub.logger.error("error id \(id): cannot catch up \(keys.count) sessions from version \(members.map(\.delivered).min() ?? 0): \(error)")
                for key in keys {
                    if let s = hub.sessions[key] { hub.closeForStoreFailure(s.outbox, errorId: id) }
                    hub.sessions.release(key)
                }
                return
            }
            for (key, chunks) in zip(keys, downloads) {
                guard let now = hub.sessions[key] else { continue }
                if !chunks.isEmpty {
                    var batch = DownloadBatch(session: now.id, sealed: chunks)
                    batch.finish(serverVersion: target, acknowledged: now.acknowledged, subscriptionVersion: now.subscriptionVersion, to: now.outbox)
                }
                hub.sessions[key]?.delivered = target
            }
        }
    }
    static func startCatchUp(_ hub: isolated SyncHub, _ key: SessionKey) {
        hub.sessions[key]?.busy = true
        Task { await catchUp(hub, key, holdingTurn: true) }
    }

    /// Sends a session everything in its view committed after its `delivered` version, read
    /// from storage, until it has reached the newest head this node knows of. Holds the
    /// session's turn throughout.
    static func catchUp(_ hub: isolated SyncHub, _ key: SessionKey, holdingTurn: Bool = false) async {
        if !holdingTurn { guard await hub.acquire(key) else { return } }
        defer { hub.sessions.release(key) }
        while let first = hub.sessions[key], first.hasQuery, first.delivered < hub.knownHead, !first.outbox.isClosed {
            // Read from storage only once the client has read its queue down to the window:
            // a device that does not read costs the window, not everything it is owed (the
            // session keeps its turn meanwhile; its own messages wait, as they would anyway).
            await first.outbox.waitForRoom(atMost: hub.limits.fanOutWindowBytes)
            guard let s = hub.sessions[key], s.hasQuery, s.delivered < hub.knownHead, !s.outbox.isClosed else { return }
            let target = hub.knownHead
            var batch = DownloadBatch(session: s.id)
            do {
                try await readChanges(hub, since: s.delivered, through: target, view: s.view, classes: s.view.classes, into: &batch)
            } catch {
                s.outbox.logger.error("connection \(s.outbox.id) session \(s.id): cannot catch up from version \(s.delivered): \(error)")
                hub.closeForStoreFailure(s.outbox)
                return
            }
            guard let now = hub.sessions[key] else { return }
            if !batch.isEmpty {
                batch.finish(serverVersion: target, acknowledged: now.acknowledged, subscriptionVersion: now.subscriptionVersion, to: now.outbox)
            }
            hub.sessions[key]?.delivered = target
        }
    }

    /// What a device catching up from `version` to `target` with `view` is sent, for
    /// `classes`. Objects changed after `target` are left for the next catch-up: a session
    /// whose own upload committed after `target` must not get that commit's state before its
    /// acknowledgement (the device would lay its pending changes over it again).
    static func readChanges(_ hub: isolated SyncHub, since version: UInt64, through target: UInt64, view: SessionView, classes: [String],
                             into batch: inout DownloadBatch) async throws {
        for i in try await changes(in: hub.storage, since: version, through: target, view: view, classes: classes, schema: hub.schema, app: hub.app) {
            batch.add(i)
        }
    }

    /// Frees a session's turn; if commits arrived meanwhile, catches it up.
    static func releaseAndCatchUp(_ hub: isolated SyncHub, _ key: SessionKey) {
        hub.sessions.release(key)
        if let s = hub.sessions[key], DeliveryRules.needsCatchUp(s.delivery, head: hub.knownHead) { startCatchUp(hub, key) }
    }

    /// The catch-up instructions themselves, read off the 
    nonisolated static func changes(in storage: any SyncStorage, since version: UInt64, through target: UInt64, view: SessionView,
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
}
