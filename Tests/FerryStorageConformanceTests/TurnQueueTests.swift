import FerryCore
import Foundation
import Testing
import FerrySyncStorage

/// The stores' queue of turns (snapshots, writers): at most its count at once; the others wait
/// their turn, in order, and run when one ends.
@Suite("Storage: turn queue")
struct TurnQueueTests {
    @Test func pastTheSlotsSnapshotsWaitForOneToClose() async throws {
        let slots = TurnQueue(2)
        let open = Arrivals()
        let gate = AsyncStream<Void>.makeStream()
        let holders = (0..<2).map { n in
            Task {
                await slots.run {
                    open.add(n)
                    for await _ in gate.stream { break }
                }
            }
        }
        try await open.wait(count: 2)
        let third = Task { await slots.run { open.add(2) } }
        // The third cannot open while both slots are held.
        try await Task.sleep(for: .milliseconds(100))
        #expect(open.values == [0, 1] || open.values == [1, 0])
        gate.continuation.yield()
        try await open.wait(count: 3)
        gate.continuation.yield()
        for h in holders { await h.value }
        await third.value
        #expect(open.values.count == 3)
    }
}

/// Values added from tasks, and a wait (polling, bounded) for how many arrived.
final class Arrivals: @unchecked Sendable {
    private let lock = ThreadLock()
    private var items: [Int] = []
    var values: [Int] { lock.withLock { items } }
    func add(_ n: Int) { lock.withLock { items.append(n) } }
    func wait(count: Int, seconds: Double = 10) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while values.count < count {
            guard Date() < deadline else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}
