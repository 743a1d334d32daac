import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import PostgresNIO

/// The change feed of a store every node writes: it hears the other nodes' commits through
/// LISTEN/NOTIFY on `ferry_changes`, and this node's own commits directly (`publish`).
///
/// NOTIFY is only a hint: a notification sent while the listener was reconnecting is gone. So
/// the feed also re-reads head and revision each time the listener (re)connects, and on a
/// timer (`pollInterval`): a dropped notification or a dead listener delays a signal by at most
/// one interval, and never loses it. The listener reconnects with a capped backoff until the
/// feed is closed. Only the newest signal matters, so each stream keeps just that one when its
/// consumer falls behind; a signal is yielded only when head or revision grew.
public final class PostgresChangeFeed: ChangeFeed, @unchecked Sendable {
    private let client: PostgresClient
    private let logger: Logger
    private let pollInterval: Duration
    private let lock = ThreadLock()
    private let broadcast: FeedBroadcast
    private var tasks: [Task<Void, Never>] = []
    /// Whether the last poll failed (to log a failure and the recovery once, not every tick).
    private var pollFailing = false
    private var lastLag: Double?

    /// Seconds between the last notification's sending (the database's clock) and this node
    /// hearing it (its own clock; skew between the two shows up here): the metric
    /// `ferry_change_feed_lag_seconds`. Nil before the first notification.
    public var lagSeconds: Double? { lock.withLock { lastLag } }

    init(client: PostgresClient, logger: Logger, initial: FeedSignal, pollInterval: Duration) {
        self.client = client
        self.logger = logger
        self.pollInterval = pollInterval
        broadcast = FeedBroadcast(initial: initial)
    }

    /// Starts the listener and the timer.
    func start() {
        let listener = Task { [weak self] () async -> Void in
            guard let self else { return }
            await self.listen()
        }
        let poller = Task { [weak self] () async -> Void in
            guard let self else { return }
            await self.poll()
        }
        lock.withLock { tasks = [listener, poller] }
    }

    public func signals() -> AsyncStream<FeedSignal> { broadcast.signals() }

    /// Raises what the feed knows (never lowers it) and signals every stream if it grew.
    func publish(headVersion: UInt64? = nil, stateRevision: UInt64? = nil) {
        broadcast.publish(headVersion: headVersion, stateRevision: stateRevision)
    }

    /// Stops the listener and the timer, and ends every stream.
    func finish() async {
        let stopping: [Task<Void, Never>] = lock.withLock {
            defer { tasks = [] }
            return tasks
        }
        broadcast.finish()
        for task in stopping { task.cancel() }
        for task in stopping { await task.value }
    }

    /// Re-reads head and revision from the database and publishes them.
    private func refresh() async throws {
        let state = try await PostgresSyncMeta.readState(client, logger: logger)
        publish(headVersion: state.headVersion, stateRevision: state.revision)
    }

    private func poll() async {
        while !Task.isCancelled {
            do { try await Task.sleep(for: pollInterval) } catch { return }
            do {
                try await refresh()
                if lock.withLock({ defer { pollFailing = false }; return pollFailing }) {
                    logger.info("PostgreSQL: the change feed reads the database again")
                }
            } catch {
                if Task.isCancelled { return }
                if !lock.withLock({ defer { pollFailing = true }; return pollFailing }) {
                    logger.error("PostgreSQL: the change feed cannot read the sync state (retrying every \(pollInterval)): \(PostgresFailure.describe(error))")
                }
            }
        }
    }

    /// LISTEN (`PostgresListener`): whatever committed before the listener (re)connected is
    /// read then, the rest arrives by NOTIFY.
    private func listen() async {
        await PostgresListener.run(client, channel: PostgresSyncMeta.channel, what: "the change feed", logger: logger,
                                   listening: { try await refresh() },
                                   notified: { notification in
                                       if let (signal, sent) = PostgresSyncMeta.notification(payload: notification.payload) {
                                           if let sent {
                                               let lag = max(0, (Double(WallClock.system.millisecondsSinceEpoch()) - Double(sent)) / 1000)  // in Double: `sent` is any Int64 a payload held
                                               lock.withLock { lastLag = lag }
                                           }
                                           publish(headVersion: signal.headVersion, stateRevision: signal.stateRevision)
                                       } else {
                                           try await refresh()
                                       }
                                   })
    }
}
