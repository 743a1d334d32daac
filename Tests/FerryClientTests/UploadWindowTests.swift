@testable import FerryClient
import Testing

/// The session's upload state as values (`UploadWindow`, `UploadProgressCount`): their written
/// invariants, without a server or a store.
@Suite struct UploadWindowTests {
    @Test func aConnectionResendsAfterWhatTheFileHoldsAsAcknowledged() {
        var w = UploadWindow(acknowledged: 3)
        w.sent(through: 9)
        #expect(w.lastUploaded == 9)
        // The connection dropped; the file says 5 was acknowledged meanwhile (another process).
        w.connected(stored: 5)
        #expect(w.lastUploaded == 5 && w.acknowledged == 5)
        // A stored acknowledgement behind the session's never takes it back.
        w.connected(stored: 4)
        #expect(w.acknowledged == 5 && w.lastUploaded == 4)
        w.sent(through: 2)
        #expect(w.lastUploaded == 4, "what was sent only grows")
    }

    @Test func anAcknowledgementMovesTheFloorAndRecordsItsSpan() {
        var w = UploadWindow(acknowledged: 2)
        #expect(w.captureFloor(for: 6) == 2, "a download that moves the acknowledgement captures writes after the current one")
        #expect(w.acknowledge(6) == 2)
        #expect(w.acknowledged == 6 && w.ackFloor == 2 && w.lastAcknowledgement == .init(after: 2, through: 6))
        #expect(w.captureFloor(for: 6) == 2, "one that does not move it may still carry that answer's reverts")
        #expect(w.acknowledge(6) == nil && w.acknowledge(5) == nil)
        #expect(w.acknowledged == 6 && w.ackFloor == 2)
        #expect(w.acknowledge(8) == 6)
        #expect(w.ackFloor == 6 && w.lastAcknowledgement?.through == w.acknowledged && w.lastAcknowledgement?.after == w.ackFloor)
    }

    /// A session opening a file whose last answer is incomplete (acknowledged through 7,
    /// answered through 4: the connection was lost before the 231 that may follow) starts
    /// with that span open, so a refusal the server sends again at BIND is recorded against it.
    @Test func aSessionStartsWithTheSpanItHasNoCompleteAnswerFor() {
        #expect(UploadWindow(acknowledged: 7, answered: 4).lastAcknowledgement == .init(after: 4, through: 7))
        #expect(UploadWindow(acknowledged: 7, answered: 7).lastAcknowledgement == nil)
        #expect(UploadWindow(acknowledged: 7).lastAcknowledgement == nil)
        var w = UploadWindow(acknowledged: 7, answered: 4)
        #expect(w.captureFloor(for: 7) == 7, "the device already took the revert when it took the acknowledgement")
        // The first acknowledgement completes only what the file had answered (below).
        #expect(w.acknowledge(9) == 4)
        #expect(w.lastAcknowledgement == .init(after: 4, through: 9))
    }

    /// A new connection of a file acknowledged through 7 but answered only through 4: the
    /// server sends the missing refusals again with its first acknowledgement (9), so that one
    /// completes the answers through 4 only, and the 231 after it answers (4, 9]; once it came,
    /// the next acknowledgement completes from 9 again (the simulation found both: a receipt
    /// settled acknowledged before its 231, and one whose rejection a later span replaced).
    @Test func aConnectionsFirstAcknowledgementCompletesOnlyWhatTheFileHadAnswered() {
        var w = UploadWindow(acknowledged: 7)
        w.connected(stored: 7, answered: 4)
        #expect(w.lastAcknowledgement == .init(after: 4, through: 7))
        #expect(w.answersComplete(for: 9) == 4 && w.answersComplete(for: 7) == nil)
        #expect(w.acknowledge(9) == 4)
        #expect(w.lastAcknowledgement == .init(after: 4, through: 9))
        w.refusalArrived()
        #expect(w.acknowledge(12) == 9)
        #expect(w.lastAcknowledgement == .init(after: 9, through: 12))
        // Without a 231 the floor goes with the connection's first acknowledgement.
        var v = UploadWindow(acknowledged: 5, answered: 3)
        #expect(v.acknowledge(6) == 3)
        #expect(v.acknowledge(8) == 6)
        // A file with every answer: as before.
        var u = UploadWindow(acknowledged: 5)
        u.connected(stored: 5, answered: 5)
        #expect(u.lastAcknowledgement == nil && u.acknowledge(6) == 5)
    }

    @Test func aResetStartsTheWindowAtTheNewHistory() {
        var w = UploadWindow(acknowledged: 4)
        w.sent(through: 10)
        w.reset(to: 12)
        #expect(w.acknowledged == 12 && w.lastUploaded == 12)
        w.adopt(stored: 11)
        #expect(w.acknowledged == 12)
    }

    @Test func progressCountsEachChangesetOnceAndReleasesItsBytesOnAcknowledgement() {
        var p = UploadProgressCount(countedThrough: 2)
        #expect(p.count([(1, 100), (3, 10), (4, 20)]) == 30, "versions at or before the counted one are ignored")
        #expect(p.count([(4, 20), (5, 5)]) == 5)
        #expect(p.countedThrough == 5)
        #expect(p.acknowledged(through: 3) == 10)
        #expect(p.acknowledged(through: 3) == 0)
        #expect(p.acknowledged(through: 9) == 25)
        // Many acknowledged changesets: the memory is bounded, the sums stay right.
        var many = UploadProgressCount(countedThrough: 0)
        #expect(many.count((1...5_000).map { (UInt64($0), 1) }) == 5_000)
        var total: UInt64 = 0
        for v in stride(from: 100, through: 5_000, by: 100) { total += many.acknowledged(through: UInt64(v)) }
        #expect(total == 5_000)
    }
}
