import FerrySyncStorage
import Testing

/// Triggers' delivery state through `TriggerStorage`: a new trigger starts at the cursor it
/// is given, one node at a time holds its lease (another takes it only once it expired),
/// progress is recorded only by the holder, and an admin's resume clears a pause.
@Suite("Storage: triggers' cursors and leases")
struct TriggerStorageTests {
    @Test(arguments: Backend.all)
    func oneNodeAtATimeDeliversATriggerAndItsProgressSurvives(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let triggers = try #require(store.operations as? any TriggerStorage)
            #expect(try await triggers.triggerStates().isEmpty)
            // Node a takes the new trigger at cursor 7; b cannot while a's lease lasts.
            let a = try #require(try await triggers.leaseTrigger("t1", node: "a", nowMilliseconds: 1_000, untilMilliseconds: 5_000, cursor: 7))
            #expect(a == TriggerState(name: "t1", cursor: 7, holder: "a", leaseUntilMilliseconds: 5_000))
            #expect(try await triggers.leaseTrigger("t1", node: "b", nowMilliseconds: 4_999, untilMilliseconds: 9_000, cursor: 99) == nil)
            // a renews; its progress is recorded.
            #expect(try await triggers.leaseTrigger("t1", node: "a", nowMilliseconds: 4_000, untilMilliseconds: 8_000, cursor: 99)?.cursor == 7)
            #expect(try await triggers.recordTrigger("t1", node: "a", TriggerProgress(cursor: 12, failures: 0, paused: false, lastError: nil, delivered: 3)))
            #expect(try await triggers.recordTrigger("t1", node: "a", TriggerProgress(cursor: 12, failures: 2, paused: false, lastError: "HTTP 500", delivered: 0)))
            // b cannot record while not holding it.
            #expect(try await !triggers.recordTrigger("t1", node: "b", TriggerProgress(cursor: 50, failures: 0, paused: false, lastError: nil, delivered: 9)))
            // a stops renewing: once the lease expired, b takes over where a stopped.
            let b = try #require(try await triggers.leaseTrigger("t1", node: "b", nowMilliseconds: 8_001, untilMilliseconds: 12_000, cursor: 99))
            #expect(b == TriggerState(name: "t1", cursor: 12, failures: 2, lastError: "HTTP 500", holder: "b", leaseUntilMilliseconds: 12_000, delivered: 3))
            #expect(try await !triggers.recordTrigger("t1", node: "a", TriggerProgress(cursor: 13, failures: 0, paused: false, lastError: nil, delivered: 1)))
            // Paused after failures, resumed by an admin.
            #expect(try await triggers.recordTrigger("t1", node: "b", TriggerProgress(cursor: 12, failures: 10, paused: true, lastError: "refused", delivered: 0)))
            #expect(try await triggers.triggerStates().map(\.paused) == [true])
            #expect(try await triggers.resumeTrigger("t1"))
            #expect(try await !triggers.resumeTrigger("nope"))
            let resumed = try await triggers.triggerStates()
            #expect(resumed.map(\.paused) == [false] && resumed.map(\.failures) == [0] && resumed.map(\.cursor) == [12])
            // Another trigger is independent of the first.
            #expect(try await triggers.leaseTrigger("t0", node: "a", nowMilliseconds: 9_000, untilMilliseconds: 10_000, cursor: 1)?.cursor == 1)
            #expect(try await triggers.triggerStates().map(\.name) == ["t0", "t1"])
        }
    }
}
