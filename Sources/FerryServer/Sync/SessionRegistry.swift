/// The sessions this node serves, and whose turn it is to send to each. Owned by the hub
/// actor (not thread-safe on its own). A session's downloads come from one sender at a time:
/// an upload's in-memory fan-out when the session is idle and exactly at the version before
/// the upload, else a task that holds the session's turn and reads from storage.
final class SessionRegistry {
    private(set) var sessions: [SessionKey: ServerSession] = [:]
    private var waiting: [SessionKey: [CheckedContinuation<Bool, Never>]] = [:]

    subscript(key: SessionKey) -> ServerSession? {
        get { sessions[key] }
        set {
            if let newValue { sessions[key] = newValue } else { remove(key) }
        }
    }

    var all: Dictionary<SessionKey, ServerSession>.Values { sessions.values }

    func keys(onConnection connection: UInt64) -> [SessionKey] { sessions.keys.filter { $0.connection == connection } }

    /// Forgets a session; tasks waiting for its turn learn that it is gone.
    func remove(_ key: SessionKey) {
        sessions[key] = nil
        for w in waiting.removeValue(forKey: key) ?? [] { w.resume(returning: false) }
    }

    /// Queues a task for a busy session's turn: resumed with true when the turn is handed to
    /// it, false if the session goes away first.
    func enqueue(_ key: SessionKey, _ waiter: CheckedContinuation<Bool, Never>) {
        guard sessions[key] != nil else { return waiter.resume(returning: false) }
        waiting[key, default: []].append(waiter)
    }

    /// Hands the turn to the next waiting task, or frees it.
    func release(_ key: SessionKey) {
        guard sessions[key] != nil else { return }
        if var queue = waiting[key], !queue.isEmpty {
            let next = queue.removeFirst()
            waiting[key] = queue.isEmpty ? nil : queue
            next.resume(returning: true)
        } else {
            sessions[key]?.busy = false
        }
    }
}
