@testable import FerryClient
import FerryTestSupport
import Testing

/// A session's life as one value (`SessionLifecycle`): the invariants written on it, checked
/// for each transition and over random sequences of them, without a server.
@Suite struct SessionLifecycleTests {
    static let boom = SyncError(code: 2, message: "bad changeset", isFatal: true, action: .protocolViolation)

    @Test func readyOnlyWhileLiveUnpausedAndNotInStandby() {
        var l = SessionLifecycle()
        #expect(l.wantsConnection && !l.ready)
        var changed = l.becameReady()
        #expect(changed && l.ready)
        changed = l.pause()
        #expect(changed && !l.ready && !l.wantsConnection)
        changed = l.pause()
        #expect(!changed, "paused twice")
        changed = l.becameReady()
        #expect(!changed && !l.ready, "a paused session is not ready")
        changed = l.resume()
        #expect(changed && !l.ready && l.wantsConnection)
        changed = l.resume()
        #expect(!changed)
        changed = l.becameReady()
        #expect(changed)
        changed = l.enterStandby()
        #expect(changed && !l.ready && !l.wantsConnection)
        changed = l.becameReady()
        #expect(!changed)
        changed = l.leaveStandby()
        #expect(changed && l.wantsConnection)
        changed = l.leaveStandby()
        #expect(!changed)
        l.notReady()
        #expect(!l.ready && l.wantsConnection)
    }

    @Test func closedAndFailedAreFinalAndTheFirstErrorStays() {
        var l = SessionLifecycle()
        _ = l.becameReady()
        var changed = l.fail(Self.boom)
        #expect(changed && !l.ready && !l.isLive)
        changed = l.fail(SyncError(code: 9, message: "later", isFatal: true, action: .applicationBug))
        #expect(!changed)
        #expect(l.fatal?.message == "bad changeset")
        let after = [l.becameReady(), l.pause(), l.resume(), l.enterStandby()]
        #expect(after == [false, false, false, false])
        var c = SessionLifecycle()
        _ = c.pause()
        let closes = [c.close(), c.close()]
        #expect(closes == [true, false])
        let resumed = c.resume(), readied = c.becameReady()
        #expect(!resumed && !readied && !c.wantsConnection && c.fatal == nil)
    }

    @Test func randomSequencesKeepTheInvariants() {
        var rng = SplitMix64(seed: 25)
        for _ in 0..<2_000 {
            var l = SessionLifecycle()
            var wasClosed = false, firstError: String?
            for step in 0..<40 {
                switch rng.next() % 8 {
                case 0: _ = l.becameReady()
                case 1: l.notReady()
                case 2: _ = l.pause()
                case 3: _ = l.resume()
                case 4: _ = l.enterStandby()
                case 5: _ = l.leaveStandby()
                case 6: if rng.next() % 4 == 0 { _ = l.close() }
                default: if rng.next() % 4 == 0 { _ = l.fail(SyncError(code: 1, message: "e\(step)", isFatal: true, action: .applicationBug)) }
                }
                #expect(!l.ready || (l.isLive && !l.paused && !l.standby))
                #expect(l.wantsConnection == (l.isLive && !l.paused && !l.standby))
                if wasClosed { #expect(l.closed) }
                wasClosed = l.closed
                if let firstError { #expect(l.fatal?.message == firstError) }
                firstError = l.fatal?.message
            }
        }
    }
}
