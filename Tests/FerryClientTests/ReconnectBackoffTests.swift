@testable import FerryClient
import Testing

/// The count a connection's retries wait by (`ReconnectBackoff`), without a socket. The waits
/// themselves: `SessionControlTests` (`ReconnectBackoff.delay`).
@Suite struct ReconnectBackoffTests {
    @Test func failuresInARowGrowTheWaitAndAServedConnectionStartsAgain() {
        var b = ReconnectBackoff()
        #expect(b.failed() == 1 && b.failed() == 2, "a socket that never opened counts")
        b.opened()
        #expect(b.attempts == 0)
        b.received(refusal: false)
        #expect(b.failed() == 1, "served, then lost: from the start")
    }

    @Test func aServerThatRefusesEveryConnectionAtOnceKeepsTheWaitGrowing() {
        var b = ReconnectBackoff()
        var waits: [Int] = []
        for _ in 0..<4 {
            b.opened()
            b.received(refusal: true)  // sync paused: the server ends it with a transient ERROR
            waits.append(b.failed())
        }
        #expect(waits == [1, 2, 3, 4], "not back to the minimum at every socket that opened")
        b.opened()
        b.received(refusal: false)
        #expect(b.refusedInARow == 0 && b.failed() == 1)
    }

    @Test func theHostsReconnectStartsFromScratch() {
        var b = ReconnectBackoff()
        b.opened()
        b.received(refusal: true)
        _ = b.failed()
        b.reset()
        #expect(b == ReconnectBackoff())
    }
}
