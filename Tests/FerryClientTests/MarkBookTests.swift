@testable import FerryClient
import FerryCore
import Synchronization
import Testing

/// The session's MARKs and waits as values (`MarkBook`, `SessionWaits`): their written
/// invariants, without a server or a loop.
@Suite struct MarkBookTests {
    /// Records which download waits completed, and how.
    final class Log: Sendable {
        let entries = Mutex<[String]>([])
        func wait(_ name: String) -> MarkBook.Wait {
            .download { [self] e in entries.withLock { $0.append(e == nil ? name : "\(name): \(e!.message)") } }
        }
        var all: [String] { entries.withLock { $0 } }
    }

    static func run(_ w: MarkBook.Wait?, _ e: FerryError? = nil) -> UInt64? {
        switch w {
        case .download(let done)?: done(e); return nil
        case .receipts(let through)?: return through
        case nil: return nil
        }
    }

    @Test func anAnswerCompletesItsWaitOnceAndARequeuedMarkGetsANewId() {
        let log = Log()
        var book = MarkBook()
        let a = book.issue(log.wait("a")), b = book.issue(log.wait("b"))
        #expect(b > a)
        _ = Self.run(book.answered(a))
        _ = Self.run(book.answered(a))
        #expect(log.all == ["a"])
        // The connection drops with b out: b waits, and an answer to its old id completes nothing.
        book.requeue()
        #expect(book.answered(b) == nil)
        let again = book.takeUnsent()
        #expect(again.count == 1 && book.takeUnsent().isEmpty)
        let b2 = book.issue(again[0])
        #expect(b2 > b)
        _ = Self.run(book.answered(b2))
        #expect(log.all == ["a", "b"])
    }

    @Test func requeuedMarksKeepTheirOrderBeforeLaterOnes() {
        let log = Log()
        var book = MarkBook()
        book.postpone(log.wait("first, never sent"))
        for w in book.takeUnsent() { _ = book.issue(w) }
        _ = book.issue(log.wait("second"))
        book.requeue()
        book.postpone(log.wait("third"))
        for w in book.takeUnsent() { _ = Self.run(w) }
        #expect(log.all == ["first, never sent", "second", "third"])
    }

    @Test func oneReceiptMarkIsOutWhereverItIsAndTakeAllEmptiesTheBook() {
        let log = Log()
        var book = MarkBook()
        #expect(!book.receiptMarkOut)
        let r = book.issue(.receipts(through: 9))
        _ = book.issue(log.wait("d"))
        #expect(book.receiptMarkOut)
        book.requeue()
        #expect(book.receiptMarkOut, "a receipt MARK waiting for the next connection is still out")
        let all = book.takeAll()
        #expect(all.count == 2 && !book.receiptMarkOut && book.takeUnsent().isEmpty && book.answered(r) == nil)
        for w in all { _ = Self.run(w, FerryError(.closed, "closed")) }
        #expect(log.all == ["d: closed"])
        #expect(Self.run(book.answered(book.issue(.receipts(through: 4)))) == 4)
    }

    @Test func waitsCompleteWhenTheStateReachesThem() {
        let log = Log()
        var waits = SessionWaits()
        func done(_ name: String) -> SessionWaits.Done { { e in log.entries.withLock { $0.append(e == nil ? name : "\(name): \(e!.message)") } } }
        waits.waitForUpload(through: 5, done("up5"))
        waits.waitForUpload(through: 8, done("up8"))
        for d in waits.uploadsDone(acknowledged: 6) { d(nil) }
        #expect(log.all == ["up5"])
        // A client reset settled through 3 and queued the recovered changes as 12: a wait for
        // a change it settled now waits for that changeset; a later one keeps its target.
        waits.waitForUpload(through: 2, done("up2"))
        waits.resetSettled(acknowledged: 3, latest: 12)
        for d in waits.uploadsDone(acknowledged: 11) { d(nil) }
        #expect(log.all == ["up5", "up8"])
        for d in waits.uploadsDone(acknowledged: 12) { d(nil) }
        #expect(log.all == ["up5", "up8", "up2"])

        waits.waitForSubscriptions(version: 2, done("s2"))
        waits.waitForSubscriptions(version: 3, done("s3"))
        #expect(waits.subscriptionsDone(version: 2, state: .pending, errorMessage: "").isEmpty)
        for (d, e) in waits.subscriptionsDone(version: 3, state: .error, errorMessage: "bad query") { d(e) }
        // Version 3 rejected: its wait fails; version 2's is answered by the later set.
        #expect(log.all.suffix(2) == ["s2", "s3: the subscription set was rejected: bad query"])
        waits.waitForSubscriptions(version: 4, done("s4"))
        for d in waits.takeSubscriptions() + waits.takeUploads() { d(FerryError(.closed, "closed")) }
        #expect(log.all.last == "s4: closed")
    }
}
