import FerryCore

/// The sessions this node serves, and whose turn it is to send to each. Owned by the hub
/// actor (not thread-safe on its own). A session's downloads come from one sender at a time:
/// an upload's in-memory fan-out when the session is idle and exactly at the version before
/// the upload, else a task that holds the session's turn and reads from storage.
///
/// A commit must not cost a visit to every session: the fan-out asks `FanOutIndex` which
/// sessions the changed objects may concern, and the others follow the *chain*: the run of
/// this node's commits that were fanned out from memory one after another. An idle session
/// with a query that was exactly at the chain's head follows it: its `delivered` version is
/// the chain's head, whatever is stored, until it leaves the chain (it becomes busy, a
/// commit concerned it while it could not be sent to, or the chain breaks because a commit
/// was not fanned out here, such as another node's). Reading a session through the subscript
/// gives its effective `delivered`; writing it back decides whether it follows: an idle
/// session with a query joins the chain when it owes nothing (`lastSkipped`) and has every
/// commit up to the chain's start, since every commit after that was fanned out here and
/// none that concerned it was missed.
final class SessionRegistry {
    private var sessions: [SessionKey: ServerSession] = [:]
    private var waiting: [SessionKey: [CheckedContinuation<Bool, Never>]] = [:]
    private var byConnection: [UInt64: Set<SessionKey>] = [:]
    private var byClientFile: [UInt64: Set<SessionKey>] = [:]
    private var index = FanOutIndex()
    /// The newest version of the chain (every follower has everything up to it).
    private(set) var chainHead: UInt64 = 0
    /// Where the chain started: every commit after it was fanned out on this node.
    private(set) var chainStart: UInt64 = 0
    /// Sessions that do not follow the chain: their stored `delivered` is what they have.
    private(set) var detached: Set<SessionKey> = []

    subscript(key: SessionKey) -> ServerSession? {
        get {
            guard var s = sessions[key] else { return nil }
            if !detached.contains(key) { s.delivered = chainHead }
            return s
        }
        set {
            guard let newValue else { return remove(key) }
            if sessions[key] == nil {
                byConnection[key.connection, default: []].insert(key)
                byClientFile[newValue.clientFile, default: []].insert(key)
                sessions[key] = newValue
                index.set(key, view: newValue.view)
            } else {
                sessions[key] = newValue
            }
            if DeliveryRules.followsChain(newValue.delivery, chainStart: chainStart, chainHead: chainHead) {
                detached.remove(key)
            } else {
                detached.insert(key)
            }
        }
    }

    /// Decides again whether an idle session follows the chain (as writing it back through the
    /// subscript does): after a fan-out skipped it, it joins once it owes nothing and has every
    /// commit up to the chain's start. Named, so that the call does not read as a no-op.
    func reconsiderChain(_ key: SessionKey) {
        guard let s = self[key] else { return }
        self[key] = s
    }

    /// Re-registers a session's view with the fan-out index (after it changed).
    func reindex(_ key: SessionKey) {
        guard let s = sessions[key] else { return }
        index.set(key, view: s.view)
    }

    func keys(onConnection connection: UInt64) -> [SessionKey] { Array(byConnection[connection] ?? []) }

    func keys(ofClientFile ident: UInt64) -> [SessionKey] { Array(byClientFile[ident] ?? []) }

    /// The sessions a change of an object of `table` may concern (see `FanOutIndex`).
    func candidates(table: String, before: [FerryValue]?, after: [FerryValue]?) -> Set<SessionKey> {
        index.candidates(table: table, before: before, after: after)
    }

    /// Sessions that do not follow the chain (few, usually): those behind, busy or without a
    /// query.
    var detachedKeys: [SessionKey] { Array(detached) }

    /// Takes a session out of the chain at its current version (it has everything up to the
    /// chain's head now, and nothing after), owing the commit to `version`: it concerned the
    /// session, which could not be sent it now.
    func skip(_ key: SessionKey, owing version: UInt64) {
        guard sessions[key] != nil else { return }
        if !detached.contains(key) {
            sessions[key]?.delivered = chainHead
            detached.insert(key)
        }
        let owed = max(sessions[key]?.lastSkipped ?? 0, version)
        sessions[key]?.lastSkipped = owed
    }

    /// A commit from `before` to `after` was fanned out from memory: followers have it.
    /// Call `breakChain(at: before)` first when `before` is not the head.
    func advanceChain(to after: UInt64) {
        chainHead = after
    }

    /// Every follower leaves the chain at the current head (a commit was not fanned out here:
    /// they may miss it), and a new, empty chain starts at `head`.
    func breakChain(at head: UInt64) {
        guard head > chainHead else { return }
        for key in sessions.keys where !detached.contains(key) {
            sessions[key]?.delivered = chainHead
            detached.insert(key)
        }
        chainHead = head
        chainStart = head
    }

    /// Forgets a session; tasks waiting for its turn learn that it is gone.
    func remove(_ key: SessionKey) {
        if let s = sessions.removeValue(forKey: key) {
            byConnection[key.connection]?.remove(key)
            if byConnection[key.connection]?.isEmpty == true { byConnection[key.connection] = nil }
            byClientFile[s.clientFile]?.remove(key)
            if byClientFile[s.clientFile]?.isEmpty == true { byClientFile[s.clientFile] = nil }
            index.remove(key)
        }
        detached.remove(key)
        for w in waiting.removeValue(forKey: key) ?? [] { w.resume(returning: false) }
    }

    /// Queues a task for a busy session's turn: resumed with true when the turn is handed to
    /// it, false if the session goes away first.
    func enqueue(_ key: SessionKey, _ waiter: CheckedContinuation<Bool, Never>) {
        guard sessions[key] != nil else { return waiter.resume(returning: false) }
        waiting[key, default: []].append(waiter)
    }

    /// Whether a task waits for the session's turn.
    func hasWaiters(_ key: SessionKey) -> Bool { !(waiting[key]?.isEmpty ?? true) }

    /// Hands the turn to the next waiting task, or frees it.
    func release(_ key: SessionKey) {
        guard sessions[key] != nil else { return }
        if var queue = waiting[key], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[key] = queue.isEmpty ? nil : queue
            next.resume(returning: true)
        } else {
            self[key]?.busy = false
        }
    }
}
