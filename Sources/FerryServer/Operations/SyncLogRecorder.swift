import FerryCore
import FerrySyncStorage
import Foundation
import Logging

/// Writes the sync log to the store in batches, off the sync path: `record` only appends to a
/// bounded queue in memory and never waits, so a slow or unreachable store never holds up a
/// connection or the hub. Past `capacity` queued entries new ones are dropped and counted
/// (`ferry_sync_log_dropped_total`); a batch the store refuses is dropped the same way.
/// Retention is applied as batches are written (each touched user's count, at most every
/// `trimInterval`, and the age limit).
///
/// Entries are gathered for `gatherWindow` after the first one of a batch arrives (a full
/// batch, a flush or a stop ends the wait at once): a busy node records one entry per upload,
/// and writing each in a transaction of its own cost the store a commit per upload, on a
/// thread that competed with the sync path's own commit (issue 23: 0.15-0.2 ms of a write's
/// latency on a 2-core machine).
final class SyncLogRecorder: Sendable {
    let node: String
    let retention: SyncLogRetention
    private let storage: any OperationsStorage
    private let metrics: ServerMetrics
    private let logger: Logger
    private let capacity: Int
    private let gatherWindow: Duration
    /// Waits out a gathering window; tests replace it to act while the writer gathers. (The
    /// default ignores cancellation: a cancelled window's timer only ends the wait early.)
    private let sleep: @Sendable (Duration) async -> Void
    static let batchSize = 500
    static let defaultGatherWindow: Duration = .milliseconds(50)
    static let trimInterval: Duration = .seconds(10)

    private struct State {
        var queue: [SyncLogEntry] = []
        /// Entries recorded and entries written or dropped, in order: a flush waits for the
        /// second to reach the first as it was when the flush began.
        var recorded: UInt64 = 0
        var settled: UInt64 = 0
        var wake: CheckedContinuation<Void, Never>?
        /// The writer waiting out a gathering window, resumed early by a full batch, a flush
        /// or a stop.
        var gathering: CheckedContinuation<Void, Never>?
        /// Counts gathering windows, so a window's timer ends only its own.
        var window: UInt64 = 0
        var flushes: [(upTo: UInt64, waiter: CheckedContinuation<Void, Never>)] = []
        var touched: Set<String> = []
        var forceTrim = false
        /// `settled` when the last trim began: flushes up to it are done.
        var trimmedUpTo: UInt64 = 0
        var stopped = false
    }
    private let state = LockedValue(State())

    init(node: String, storage: any OperationsStorage, retention: SyncLogRetention, metrics: ServerMetrics, logger: Logger, capacity: Int = 10_000,
         gatherWindow: Duration = SyncLogRecorder.defaultGatherWindow,
         // Task.sleep throws only when cancelled: the wait is over then too.
         sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) }) {
        self.node = node
        self.storage = storage
        self.retention = retention
        self.metrics = metrics
        self.logger = logger
        self.capacity = capacity
        self.gatherWindow = gatherWindow
        self.sleep = sleep
    }

    /// Queues one entry; never waits. `details` is a JSON object.
    func record(_ kind: SyncLogKind, userId: String, connection: UInt64, _ message: String, details: [(String, JSON)] = []) {
        let entry = SyncLogEntry(timeMilliseconds: Self.nowMilliseconds(), kind: kind, userId: userId, node: node, connectionId: connection,
                                 message: excerpt(message, limit: ServerEventLog.maxMessageBytes), details: JSON.object(details).text)
        let (accepted, wake) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !s.stopped, s.queue.count < capacity else { return (false, nil) }
            s.queue.append(entry)
            s.recorded += 1
            if s.queue.count >= Self.batchSize, let g = s.gathering {
                s.gathering = nil
                return (true, g)
            }
            defer { s.wake = nil }
            return (true, s.wake)
        }
        wake?.resume()
        if !accepted { metrics.syncLogEntryDropped() }
    }

    /// Returns once everything recorded before it is written (or dropped), and retention was
    /// applied: the admin API reads the log after it, so a node shows its own events at once.
    func flush() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let (done, wake) = state.withLock { s -> (Bool, CheckedContinuation<Void, Never>?) in
                if s.stopped || s.trimmedUpTo >= s.recorded { return (true, nil) }
                s.flushes.append((s.recorded, c))
                s.forceTrim = true
                defer { s.wake = nil; s.gathering = nil }
                return (false, s.wake ?? s.gathering)
            }
            wake?.resume()
            if done { c.resume() }
        }
    }

    /// `flush()`, giving up after `limit` (a store that does not answer, or a recorder that
    /// is not running, must not hold up an admin request).
    func flush(within limit: Duration) async {
        let gate = LockedValue<CheckedContinuation<Void, Never>?>(nil)
        let open: @Sendable () -> Void = { gate.withLock { c in c?.resume(); c = nil } }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            gate.withLock { $0 = c }
            Task { await self.flush(); open() }
            // Throws only when cancelled; the gate opens either way.
            Task { try? await Task.sleep(for: limit); open() }
        }
    }

    /// Writes batches until `stop`, then what is still queued.
    func run() async {
        var lastTrim = ContinuousClock.now
        while true {
            let (batch, stopped) = await next()
            if !batch.isEmpty {
                do { try await storage.appendSyncLog(batch) } catch {
                    logger.warning("cannot write \(batch.count) sync log entries (dropped): \(error)")
                    for _ in batch { metrics.syncLogEntryDropped() }
                }
            }
            let (users, trim, settled) = state.withLock { s -> ([String], Bool, UInt64) in
                s.settled += UInt64(batch.count)
                guard s.forceTrim || stopped || ContinuousClock.now - lastTrim >= Self.trimInterval else { return ([], false, s.settled) }
                defer { s.touched = []; s.forceTrim = false }
                return (Array(s.touched), true, s.settled)
            }
            if trim {
                lastTrim = ContinuousClock.now
                do { try await storage.trimSyncLog(retention, users: users, nowMilliseconds: Self.nowMilliseconds()) } catch {
                    logger.warning("cannot trim the sync log: \(error)")
                }
            }
            // A flush returns once its entries are written and a trim ran after them; one
            // whose entries are still queued asks for another trim.
            let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
                if trim { s.trimmedUpTo = settled }
                let ready = s.flushes.filter { $0.upTo <= s.trimmedUpTo }.map(\.waiter)
                s.flushes.removeAll { $0.upTo <= s.trimmedUpTo }
                if !s.flushes.isEmpty { s.forceTrim = true }
                return ready
            }
            for r in ready { r.resume() }
            if stopped { break }
        }
    }

    /// The next batch, waiting for one (or for a flush that wants a trim); `stopped` once
    /// `stop` was called and the queue is empty.
    private func next() async -> ([SyncLogEntry], stopped: Bool) {
        while true {
            // Each batch gathers once, from its first entry (even one that came while the
            // last batch was being written).
            if state.withLock({ !$0.queue.isEmpty }) { await gather() }
            let taken = state.withLock { s -> ([SyncLogEntry], Bool)? in
                if !s.queue.isEmpty {
                    let n = min(Self.batchSize, s.queue.count)
                    let batch = Array(s.queue.prefix(n))
                    s.queue.removeFirst(n)
                    for e in batch { s.touched.insert(e.userId) }
                    return (batch, false)
                }
                if s.stopped { return ([], true) }
                if s.forceTrim { return ([], false) }
                return nil
            }
            if let taken { return taken }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if !s.queue.isEmpty || s.stopped || s.forceTrim { return true }
                    s.wake = c
                    return false
                }
                if now { c.resume() }
            }
        }
    }

    /// Waits up to `gatherWindow` for more entries, unless a batch is full or a flush or a
    /// stop is asked for. One writer only: `run` is the sole caller of `next`.
    private func gather() async {
        let timer = LockedValue<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let parked = state.withLock { s -> UInt64? in
                if s.queue.count >= Self.batchSize || s.stopped || s.forceTrim { return nil }
                s.gathering = c
                s.window += 1
                return s.window
            }
            guard let parked else { return c.resume() }
            let length = gatherWindow, sleep = sleep
            timer.withLock { t in
                t = Task {
                    await sleep(length)
                    let due = self.state.withLock { s -> CheckedContinuation<Void, Never>? in
                        guard s.window == parked else { return nil }
                        defer { s.gathering = nil }
                        return s.gathering
                    }
                    due?.resume()
                }
            }
        }
        // Woken early: the window's timer has nothing left to do.
        timer.withLock { $0?.cancel() }
    }

    /// No more entries are taken; `run` writes what is queued and returns.
    func stop() {
        let wake = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.stopped = true
            defer { s.wake = nil; s.gathering = nil }
            return s.wake ?? s.gathering
        }
        wake?.resume()
    }

    static func nowMilliseconds() -> Int64 { WallClock.system.millisecondsSinceEpoch() }
}
