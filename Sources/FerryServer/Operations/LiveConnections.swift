import FerryCore
import FerrySyncStorage

/// The sync connections this node has open, with what an operator asks about each (user, SDK,
/// client file, bytes, sessions and their states). Behind a lock, written by the connections'
/// tasks and the hub, read by the admin API and the metrics without waiting on either.
final class LiveConnections: Sendable {
    struct Connection: Sendable {
        var userId: String
        var sdk: String?
        var connectedSinceMilliseconds: Int64
        var bytesUp = 0
        var bytesDown = 0
        var clientFile: UInt64?
        var sessions: [UInt64: SessionState] = [:]
    }

    /// What the gauges show.
    struct Counts: Sendable {
        var connections = 0
        var sessions: [SessionState: Int] = [:]
    }

    private let connections = LockedValue<[UInt64: Connection]>([:])

    func opened(_ id: UInt64, userId: String, sdk: String?, atMilliseconds now: Int64) {
        connections.withLock { $0[id] = Connection(userId: userId, sdk: sdk, connectedSinceMilliseconds: now) }
    }

    func closed(_ id: UInt64) { connections.withLock { $0[id] = nil } }

    func received(_ id: UInt64, bytes: Int) { connections.withLock { $0[id]?.bytesUp += bytes } }
    func sent(_ id: UInt64, bytes: Int) { connections.withLock { $0[id]?.bytesDown += bytes } }

    func sessionBound(_ id: UInt64, session: UInt64, clientFile: UInt64) {
        connections.withLock {
            $0[id]?.clientFile = clientFile
            $0[id]?.sessions[session] = .bound
        }
    }

    func session(_ id: UInt64, _ session: UInt64, is state: SessionState) {
        connections.withLock { c in
            guard c[id]?.sessions[session] != nil else { return }
            c[id]?.sessions[session] = state
        }
    }

    func sessionUnbound(_ id: UInt64, session: UInt64) { connections.withLock { _ = $0[id]?.sessions.removeValue(forKey: session) } }

    func connection(_ id: UInt64) -> Connection? { connections.withLock { $0[id] } }

    var counts: Counts {
        connections.withLock { all in
            var counts = Counts(connections: all.count)
            for c in all.values { for s in c.sessions.values { counts.sessions[s, default: 0] += 1 } }
            return counts
        }
    }

    /// This node's connections as published for the cluster.
    func records(node: String) -> [LiveConnectionRecord] {
        connections.withLock { all in
            all.sorted { $0.key < $1.key }.map { id, c in
                LiveConnectionRecord(node: node, connectionId: id, userId: c.userId, clientFile: c.clientFile, sdk: c.sdk,
                                     connectedSinceMilliseconds: c.connectedSinceMilliseconds, bytesUp: Int64(clamping: c.bytesUp),
                                     bytesDown: Int64(clamping: c.bytesDown), sessions: c.sessions.count)
            }
        }
    }
}
