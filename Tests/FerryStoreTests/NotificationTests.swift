import Testing
import FerryCore
@testable import FerryStore
@testable import FerryClient
#if canImport(Glibc)
import Glibc
#endif

/// Collects summaries from callbacks, thread-safely.
final class Collector: @unchecked Sendable {
    private let lock = ThreadLock()
    private var items: [ChangeSummary] = []
    func add(_ s: ChangeSummary) { lock.withLock { items.append(s) } }
    var all: [ChangeSummary] { lock.withLock { items } }

    /// Waits (polling the clock, not sleeping blindly) until `count` summaries arrived.
    func wait(for count: Int, seconds: Double = 10) -> Bool {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let deadline = Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 + seconds
        while true {
            if all.count >= count { return true }
            clock_gettime(CLOCK_MONOTONIC, &ts)
            if Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9 > deadline { return false }
            sched_yield()
        }
    }
}

@Suite("Change notifications")
struct NotificationTests {
    @Test func queryNotificationsReportInsertsDeletesAndModifications() throws {
        let poll = try PollingScheduler()
        let db = try Fixtures.memory(scheduler: poll)
        defer { db.close() }
        let seen = Collector()
        let token = try db.observeQuery(classIndex: 0, query: "complexity <= 4", arguments: [], callback: seen.add)
        try db.beginWrite()
        try Fixtures.createItem(db, 1, complexity: 1)
        try Fixtures.createItem(db, 2, complexity: 9)
        try db.commit()
        #expect(poll.deliver() == 1)
        #expect(seen.all.last?.inserted == [Fixtures.oid(1)])

        try db.beginWrite()
        try db.set(classIndex: 0, key: Fixtures.oid(1), property: 2, value: .string("renamed"))
        try db.set(classIndex: 0, key: Fixtures.oid(2), property: 3, value: .int(2))   // enters the view
        try db.commit()
        _ = poll.deliver()
        #expect(seen.all.last?.inserted == [Fixtures.oid(2)])
        #expect(seen.all.last?.modified == [Fixtures.oid(1)])
        #expect(seen.all.last?.modifiedProperties == [2])

        try db.beginWrite()
        try db.delete(classIndex: 0, key: Fixtures.oid(1))
        try db.set(classIndex: 0, key: Fixtures.oid(2), property: 3, value: .int(8))    // leaves the view
        try db.commit()
        _ = poll.deliver()
        #expect(Set(seen.all.last?.deleted ?? []) == [Fixtures.oid(1), Fixtures.oid(2)])

        token.cancel()
        try db.beginWrite()
        try Fixtures.createItem(db, 3, complexity: 0)
        try db.commit()
        _ = poll.deliver()
        #expect(seen.all.count == 3)
    }

    @Test func objectNotifications() throws {
        let poll = try PollingScheduler()
        let db = try Fixtures.memory(scheduler: poll)
        defer { db.close() }
        let seen = Collector()
        let token = try db.observeObject(classIndex: 0, key: Fixtures.oid(7), callback: seen.add)
        defer { token.cancel() }
        try db.beginWrite(); try Fixtures.createItem(db, 7); try db.commit()
        _ = poll.deliver()
        try db.beginWrite(); try Fixtures.createItem(db, 8); try db.commit()   // another object: nothing
        #expect(poll.deliver() == 0)
        try db.beginWrite(); try db.addInteger(classIndex: 0, key: Fixtures.oid(7), property: 3, delta: 1); try db.commit()
        _ = poll.deliver()
        try db.beginWrite(); try db.delete(classIndex: 0, key: Fixtures.oid(7)); try db.commit()
        _ = poll.deliver()
        let all = seen.all
        #expect(all.count == 3)
        #expect(all.first?.inserted == [Fixtures.oid(7)])
        #expect(all.dropFirst().first?.modified == [Fixtures.oid(7)])
        #expect(all.dropFirst().first?.modifiedProperties == [3])
        #expect(all.last?.deleted == [Fixtures.oid(7)])

        // Commits between two deliveries are reported by their net effect: created then deleted is nothing.
        try db.beginWrite(); try Fixtures.createItem(db, 7); try db.commit()
        try db.beginWrite(); try db.delete(classIndex: 0, key: Fixtures.oid(7)); try db.commit()
        _ = poll.deliver()
        #expect(seen.all.count == 3)
    }

    @Test func loopDeliveryRunsOnTheLoopThread() throws {
        let db = try Fixtures.memory(scheduler: try LoopScheduler())
        defer { db.close(); db.scheduler.shutdown() }
        let seen = Collector()
        let token = try db.observeQuery(classIndex: 0, query: "TRUEPREDICATE", arguments: [], callback: seen.add)
        defer { token.cancel() }
        for n in 1...50 {
            try db.beginWrite()
            try Fixtures.createItem(db, UInt32(n))
            try db.commit()
        }
        #expect(seen.wait(for: 1))
        // However deliveries coalesced, every insert is reported exactly once.
        var inserted: [FerryValue] = []
        let deadline = 200
        for _ in 0..<deadline where inserted.count < 50 {
            inserted = seen.all.flatMap(\.inserted)
            if inserted.count < 50 { _ = seen.wait(for: seen.all.count + 1, seconds: 0.05) }
        }
        #expect(inserted.count == 50)
        #expect(Set(inserted).count == 50)
        #expect(seen.all.allSatisfy { $0.modified.isEmpty && $0.deleted.isEmpty })
    }
}
