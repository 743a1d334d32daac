import FerrySyncStorage
import Logging

/// Publishes this node's connections to the store every `interval`, for the device list of
/// every node; a node that stops publishing (gone, or cut off from the store) drops out of the
/// list after `freshness`. At shutdown it withdraws them.
struct LiveConnectionPublisher: Sendable {
    let node: String
    let live: LiveConnections
    let storage: any OperationsStorage
    let interval: Duration
    let logger: Logger

    /// How long a publication counts: three intervals, so one slow write does not hide a node.
    var freshness: Duration { interval * 3 }

    func run() async {
        while !Task.isCancelled {
            do {
                try await storage.publishConnections(node: node, live.records(node: node), nowMilliseconds: SyncLogRecorder.nowMilliseconds())
            } catch {
                logger.warning("cannot publish this node's connections: \(error)")
            }
            do { try await Task.sleep(for: interval) } catch { break }
        }
        do { try await storage.publishConnections(node: node, [], nowMilliseconds: SyncLogRecorder.nowMilliseconds()) } catch {
            logger.warning("cannot clear this node's published connections on shutdown (they expire with their heartbeat): \(error)")
        }
    }
}
