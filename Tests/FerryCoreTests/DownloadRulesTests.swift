import FerryCore
import Testing

/// How a device integrates a download (`DownloadPlan`), without SQLite: the acknowledgement,
/// the rebase of local changes, the fast path, the revert capture's start, the answers and the
/// server version. FerryStore's integration tests cover the SQL that carries it out.
@Suite struct DownloadRulesTests {
    static func plan(stored: UInt64 = 0, ack: UInt64 = 0, latest: UInt64 = 0, encoded: Bool = true, observed: Bool = false,
                     floor: UInt64? = nil, answeredThrough: UInt64? = nil, completes: Bool = true) -> DownloadPlan {
        DownloadPlan.make(stored: stored, acknowledged: ack, latestLocal: latest, encoded: encoded, observed: observed,
                          captureFloor: floor, answeredThrough: answeredThrough, serverVersion: 40, completesVersion: completes)
    }

    @Test func theAcknowledgementNeverGoesBack() {
        #expect(Self.plan(stored: 7, ack: 5, latest: 9).acknowledged == 7)
        #expect(Self.plan(stored: 7, ack: 9, latest: 9).acknowledged == 9)
    }

    @Test func aBootstrapWithNothingLocalGoesFromTheDecoderIntoRows() {
        let p = Self.plan(latest: 0)
        #expect(p.rowsFromDecoder && p.rebaseAfter == nil && p.captureAfter == nil)
        #expect(!Self.plan(encoded: false).rowsFromDecoder, "instructions already decoded are written as they are")
        #expect(!Self.plan(observed: true).rowsFromDecoder, "observers need the instructions")
        #expect(!Self.plan(stored: 2, ack: 2, latest: 3).rowsFromDecoder, "a local change to lay again needs them")
        #expect(!Self.plan(latest: 3, floor: 1).rowsFromDecoder, "a capture needs them")
        #expect(Self.plan(ack: 3, latest: 3, floor: 3).rowsFromDecoder, "no write after the floor: nothing to capture")
    }

    @Test func unacknowledgedLocalChangesAreLaidAgainOverWhatTheDownloadTouched() {
        #expect(Self.plan(stored: 2, ack: 4, latest: 6).rebaseAfter == 4, "from the new acknowledgement")
        #expect(Self.plan(stored: 2, ack: 6, latest: 6).rebaseAfter == nil, "everything acknowledged: nothing to lay again")
        let a = ObjectKey(table: "Doc", key: .string("a")), b = ObjectKey(table: "Doc", key: .string("b"))
        let local: [Instruction] = [
            .set(table: "Doc", key: .string("a"), field: "title", value: .string("1")),
            .set(table: "Doc", key: .string("b"), field: "title", value: .string("2")),
            .erase(table: "Doc", key: .string("a")),
            .set(table: "Item", key: .string("a"), field: "title", value: .string("3")),
        ]
        #expect(DownloadPlan.rebase(local, touched: [a]) == [local[0], local[2]], "the touched object's changes, in order; another class's same key is not it")
        #expect(DownloadPlan.rebase(local, touched: [a, b]) == Array(local.prefix(3)))
        #expect(DownloadPlan.rebase(local, touched: []).isEmpty)
    }

    @Test func theCaptureReadsTheRecentWritesButNarrowsPastItsBound() {
        let p = Self.plan(stored: 5, ack: 8, latest: 9, floor: 3)
        #expect(p.captureAfter == 3 && p.narrowCaptureTo == 5)
        #expect(p.captureStart(historyBytes: 100) == 3)
        #expect(p.captureStart(historyBytes: DownloadPlan.captureBytes + 1) == 5, "a bulk import: only what the server had not acknowledged")
        let atStored = Self.plan(stored: 5, ack: 8, latest: 9, floor: 5)
        #expect(atStored.narrowCaptureTo == nil && atStored.captureStart(historyBytes: .max) == 5)
        #expect(Self.plan(stored: 5, ack: 8, latest: 9, floor: nil).captureStart(historyBytes: 0) == nil)
    }

    @Test func aMovedAcknowledgementCompletesTheAnswersBeforeIt() {
        #expect(Self.plan(stored: 4, ack: 6, latest: 6).answered == 4)
        #expect(Self.plan(stored: 4, ack: 6, latest: 6, answeredThrough: 2).answered == 2, "the session knows answers after 2 are still to come")
        #expect(Self.plan(stored: 4, ack: 4, latest: 6).answered == nil, "not moved: unchanged")
    }

    @Test func onlyADownloadThatCompletesAVersionRecordsIt() {
        #expect(Self.plan().serverVersion == 40)
        #expect(Self.plan(completes: false).serverVersion == nil)
    }
}

/// A write receipt's state from the file's acknowledgement and the agent's watermarks
/// (`ReceiptRules`), without a store.
@Suite struct ReceiptRulesTests {
    @Test func acknowledgedOnlyOnceTheAnswerIsComplete() {
        // Acknowledged through 10, answers complete through 6, sent through 12.
        #expect(ReceiptRules.state(of: 5, acknowledged: 10, settled: 6, uploaded: 12) == .acknowledged)
        #expect(ReceiptRules.state(of: 8, acknowledged: 10, settled: 6, uploaded: 12) == .uploaded, "acknowledged, its 231 may still come")
        #expect(ReceiptRules.state(of: 11, acknowledged: 10, settled: 6, uploaded: 12) == .uploaded)
        #expect(ReceiptRules.state(of: 13, acknowledged: 10, settled: 6, uploaded: 12) == .local)
    }

    @Test func withNothingSettledThisRunTheFilesAcknowledgementStands() {
        #expect(ReceiptRules.state(of: 10, acknowledged: 10, settled: nil, uploaded: 0) == .acknowledged)
        #expect(ReceiptRules.state(of: 11, acknowledged: 10, settled: nil, uploaded: 0) == .local, "not sent this run: local again")
        #expect(ReceiptRules.state(of: 9, acknowledged: 10, settled: 20, uploaded: 0) == .acknowledged, "settled never runs past the acknowledgement")
        #expect(ReceiptRules.state(of: 15, acknowledged: 10, settled: 20, uploaded: 0) == .local)
    }
}
