import FerryCore
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// The sync log's writer (issue 14): recording never waits for the store, a full queue drops
/// and counts, a failing store loses only its batch, and a flush waits for the entries before
/// it and for retention.
@Suite("Server: sync log recorder")
struct SyncLogRecorderTests {
    /// A store whose writes wait at a gate the test opens, or fail.
    final class GatedStore: OperationsStorage, @unchecked Sendable {
        private let lock = ThreadLock()
        private var entries: [SyncLogEntry] = []
        private var open = false
        private var gate: [CheckedContinuation<Void, Never>] = []
        private var writesStarted = 0
        private var startWaiters: [(Int, CheckedContinuation<Void, Never>)] = []
        private(set) var trims: [[String]?] = []
        private var batches: [Int] = []
        let fails: Bool

        init(open: Bool = false, fails: Bool = false) {
            self.open = open
            self.fails = fails
        }

        var stored: [SyncLogEntry] { lock.withLock { entries } }
        var trimCalls: Int { lock.withLock { trims.count } }
        /// The sizes of the batches written, in order.
        var batchSizes: [Int] { lock.withLock { batches } }

        func appendSyncLog(_ batch: [SyncLogEntry]) async throws {
            let ready: [CheckedContinuation<Void, Never>] = lock.withLock {
                writesStarted += 1
                let r = startWaiters.filter { $0.0 <= writesStarted }.map(\.1)
                startWaiters.removeAll { $0.0 <= writesStarted }
                return r
            }
            for r in ready { r.resume() }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if open { return true }
                    gate.append(c)
                    return false
                }
                if now { c.resume() }
            }
            if fails { throw CancellationError() }
            lock.withLock { entries += batch; batches.append(batch.count) }
        }

        /// Returns once `n` writes began.
        func waitForWrites(_ n: Int) async {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = lock.withLock { () -> Bool in
                    if writesStarted >= n { return true }
                    startWaiters.append((n, c))
                    return false
                }
                if now { c.resume() }
            }
        }

        func openGate() {
            let waiting: [CheckedContinuation<Void, Never>] = lock.withLock {
                open = true
                defer { gate = [] }
                return gate
            }
            for w in waiting { w.resume() }
        }

        func syncLog(_ query: SyncLogQuery) async throws -> [SyncLogEntry] { stored }
        func trimSyncLog(_ retention: SyncLogRetention, users: [String]?, nowMilliseconds: Int64) async throws -> Int {
            lock.withLock { trims.append(users) }
            return 0
        }
        func publishConnections(node: String, _ connections: [LiveConnectionRecord], nowMilliseconds: Int64) async throws {}
        func liveConnections(freshSinceMilliseconds: Int64) async throws -> [LiveConnectionRecord] { [] }
        func closeOperations() async {}
    }

    static func dropped(_ metrics: ServerMetrics) -> Double? {
        let text = String(decoding: metrics.render(), as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix("ferry_sync_log_dropped_total ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    @Test func aStalledStoreNeverHoldsUpRecordingAndAFullQueueDropsAndCounts() async throws {
        let store = GatedStore()
        let metrics = ServerMetrics()
        let recorder = SyncLogRecorder(node: "n", storage: store, retention: SyncLogRetention(), metrics: metrics, logger: .init(label: "t"), capacity: 10)
        let running = Task { await recorder.run() }
        recorder.record(.upload, userId: "ann", connection: 1, "first")
        await store.waitForWrites(1)  // the writer holds "first" and waits at the gate
        // Recording goes on at once while the store is stuck: 10 queued, the rest dropped.
        for n in 0..<25 { recorder.record(.upload, userId: "ann", connection: 1, "entry \(n)") }
        #expect(Self.dropped(metrics) == 15)
        store.openGate()
        await recorder.flush()
        #expect(store.stored.map(\.message) == ["first"] + (0..<10).map { "entry \($0)" })
        #expect(store.stored.allSatisfy { $0.node == "n" && $0.userId == "ann" && $0.kind == .upload })
        // The flush applied retention to the user written.
        #expect(store.trims.last == ["ann"])
        recorder.stop()
        await running.value
    }

    @Test func aFailingStoreLosesOnlyItsBatch() async throws {
        let store = GatedStore(open: true, fails: true)
        let metrics = ServerMetrics()
        let recorder = SyncLogRecorder(node: "n", storage: store, retention: SyncLogRetention(), metrics: metrics, logger: .init(label: "t"))
        let running = Task { await recorder.run() }
        for n in 0..<3 { recorder.record(.error, userId: "bob", connection: 2, "e\(n)") }
        await recorder.flush()
        #expect(Self.dropped(metrics) == 3)
        #expect(store.stored.isEmpty)
        recorder.stop()
        await running.value
    }

    @Test func whatIsQueuedAtStopIsWritten() async throws {
        let store = GatedStore()
        let recorder = SyncLogRecorder(node: "n", storage: store, retention: SyncLogRetention(), metrics: ServerMetrics(), logger: .init(label: "t"))
        let running = Task { await recorder.run() }
        recorder.record(.connectionOpened, userId: "c", connection: 3, "a")
        await store.waitForWrites(1)
        recorder.record(.connectionClosed, userId: "c", connection: 3, "b")
        recorder.stop()
        store.openGate()
        await running.value
        #expect(store.stored.map(\.message) == ["a", "b"])
        // After the stop nothing more is taken, and a flush does not wait.
        recorder.record(.error, userId: "c", connection: 3, "late")
        await recorder.flush()
        #expect(store.stored.count == 2)
    }

    /// Issue 23: a node records an entry per upload, and wrote each in a transaction of its
    /// own. Entries that arrive while the writer gathers go in the same batch.
    @Test func entriesThatArriveWhileTheWriterGathersGoInOneBatch() async throws {
        let store = GatedStore(open: true)
        let box = LockedValue<SyncLogRecorder?>(nil)
        let gathered = LockedValue(0)
        // The window's wait: more entries arrive while it lasts.
        let recorder = SyncLogRecorder(node: "n", storage: store, retention: SyncLogRetention(), metrics: ServerMetrics(), logger: .init(label: "t"),
                                       sleep: { _ in
                                           gathered.withLock { $0 += 1 }
                                           box.withLock { $0 }?.record(.upload, userId: "ann", connection: 1, "b")
                                           box.withLock { $0 }?.record(.upload, userId: "ann", connection: 1, "c")
                                       })
        box.withLock { $0 = recorder }
        let running = Task { await recorder.run() }
        recorder.record(.upload, userId: "ann", connection: 1, "a")
        await store.waitForWrites(1)
        await recorder.flush()
        #expect(store.stored.map(\.message).prefix(3) == ["a", "b", "c"])
        #expect(store.batchSizes.first == 3)
        #expect(gathered.withLock { $0 } >= 1)
        box.withLock { $0 = nil }
        recorder.stop()
        await running.value
    }

    /// A flush, a stop and a full batch do not wait for the window (an hour here).
    @Test(.timeLimit(.minutes(1))) func aFlushAStopAndAFullBatchEndTheWindowAtOnce() async throws {
        let store = GatedStore(open: true)
        let recorder = SyncLogRecorder(node: "n", storage: store, retention: SyncLogRetention(), metrics: ServerMetrics(), logger: .init(label: "t"),
                                       gatherWindow: .seconds(3600))
        let running = Task { await recorder.run() }
        recorder.record(.upload, userId: "ann", connection: 1, "a")
        await recorder.flush()
        #expect(store.stored.map(\.message) == ["a"])
        for n in 0..<SyncLogRecorder.batchSize { recorder.record(.upload, userId: "ann", connection: 1, "full \(n)") }
        await store.waitForWrites(2)
        recorder.record(.upload, userId: "ann", connection: 1, "last")
        recorder.stop()
        await running.value
        #expect(store.batchSizes == [1, SyncLogRecorder.batchSize, 1])
        #expect(store.stored.last?.message == "last")
    }
}
