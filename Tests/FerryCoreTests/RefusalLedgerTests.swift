import Testing
@testable import FerryCore

/// The server's record of the refusals it sent a client file, and what it sends again to a
/// device that did not get them (issue 25: the simulation found refusals lost with their
/// connection and never told).
@Suite("Rules: refusal ledger")
struct RefusalLedgerTests {
    static func w(_ key: String, _ reason: String = "write not allowed") -> CompensatingWrite {
        CompensatingWrite(objectType: "Item", primaryKey: .string(key), reason: reason)
    }

    @Test func whatIsSentAgainIsWhatFollowsTheAnsweredVersionUpToTheAcknowledgement() {
        var l = RefusalLedger()
        l.record(through: 3, writes: [Self.w("a")])
        l.record(through: 5, writes: [Self.w("b")])
        l.record(through: 9, writes: [Self.w("c")])
        #expect(l.toRepeat(answeredThrough: 0, acknowledged: 9) == [Self.w("a"), Self.w("b"), Self.w("c")])
        #expect(l.toRepeat(answeredThrough: 3, acknowledged: 9) == [Self.w("b"), Self.w("c")])
        #expect(l.toRepeat(answeredThrough: 4, acknowledged: 9) == [Self.w("b"), Self.w("c")])
        #expect(l.toRepeat(answeredThrough: 9, acknowledged: 9) == [])
        // Nothing past what the server made durable.
        #expect(l.toRepeat(answeredThrough: 3, acknowledged: 5) == [Self.w("b")])
        #expect(l.records.map(\.through) == [3, 5, 9])
    }

    @Test func whatADeviceAnsweredIsForgottenAndNothingLaterIs() {
        var l = RefusalLedger()
        l.record(through: 3, writes: [Self.w("a")])
        l.record(through: 5, writes: [Self.w("b")])
        l.record(through: 9, writes: [Self.w("c")])
        let before = l
        l.forgetAnswered(through: 4)
        #expect(l.records.map(\.through) == [5, 9])
        // What a device that answered through less than 5 is sent is unchanged.
        #expect(l.toRepeat(answeredThrough: 4, acknowledged: 9) == before.toRepeat(answeredThrough: 4, acknowledged: 9))
        l.forgetAnswered(through: 9)
        #expect(l.isEmpty && l == RefusalLedger())
        // The mark of refusals the bound dropped goes once the device answered past it.
        var bounded = RefusalLedger()
        bounded.record(through: 2, writes: [Self.w("a"), Self.w("b")], maxWrites: 2)
        bounded.record(through: 4, writes: [Self.w("c")], maxWrites: 2)
        #expect(bounded.droppedThrough == 2)
        bounded.forgetAnswered(through: 1)
        #expect(bounded.lostRefusals(answeredThrough: 1) && bounded.records.map(\.through) == [4])
        bounded.forgetAnswered(through: 3)
        #expect(!bounded.lostRefusals(answeredThrough: 0) && bounded.records.map(\.through) == [4])
    }

    @Test func whatAStoreKeepsAfterABind() {
        var l = RefusalLedger()
        l.record(through: 3, writes: [Self.w("a")])
        l.record(through: 5, writes: [Self.w("b")])
        #expect(RefusalLedger.forgettingAnswered(stored: [], through: 9) == nil)
        #expect(RefusalLedger.forgettingAnswered(stored: l.encoded, through: 2) == nil, "nothing answered: no write")
        #expect(RefusalLedger.forgettingAnswered(stored: l.encoded, through: 3)?.records.map(\.through) == [5])
        #expect(RefusalLedger.forgettingAnswered(stored: l.encoded, through: 5) == RefusalLedger())
        // Damaged bytes are dropped.
        #expect(RefusalLedger.forgettingAnswered(stored: [1, 0, 9, 9], through: 0) == RefusalLedger())
    }

    @Test func aBindRepeatsWhatFollowsItsAnswerAndKeepsOnlyThat() {
        var l = RefusalLedger()
        l.record(through: 3, writes: [Self.w("a")])
        l.record(through: 5, writes: [Self.w("b")])
        let (again, kept) = l.atBind(answeredThrough: 3, acknowledged: 5)
        #expect(again == [Self.w("b")])
        #expect(kept.records.map(\.through) == [5])
        // A later bind that lost that answer too is still told.
        #expect(kept.atBind(answeredThrough: 3, acknowledged: 5).repeat == [Self.w("b")])
        #expect(kept.atBind(answeredThrough: 5, acknowledged: 5) == ([], RefusalLedger()))
    }

    @Test func anObjectRefusedTwiceIsNamedOnceWithItsLastReasonInFirstOrder() {
        var l = RefusalLedger()
        l.record(through: 2, writes: [Self.w("a", "first"), Self.w("b")])
        l.record(through: 2, writes: [Self.w("c")])  // the same acknowledgement: one record
        l.record(through: 4, writes: [Self.w("a", "second")])
        #expect(l.records.count == 2)
        #expect(l.toRepeat(answeredThrough: 0, acknowledged: 4) == [Self.w("a", "second"), Self.w("b"), Self.w("c")])
        l.record(through: 6, writes: [])
        #expect(l.records.count == 2)
    }

    @Test func theBoundDropsTheOldestAndSaysWhoMissedThem() {
        var l = RefusalLedger()
        for v in UInt64(1)...10 { l.record(through: v, writes: [Self.w("k\(v)a"), Self.w("k\(v)b")], maxWrites: 6) }
        #expect(l.records.map(\.through) == [8, 9, 10])
        #expect(l.droppedThrough == 7)
        #expect(l.lostRefusals(answeredThrough: 6) && !l.lostRefusals(answeredThrough: 7))
        // One upload larger than the bound keeps its last writes.
        var big = RefusalLedger()
        big.record(through: 3, writes: (0..<10).map { Self.w("x\($0)") }, maxWrites: 4)
        #expect(big.toRepeat(answeredThrough: 0, acknowledged: 3) == (6..<10).map { Self.w("x\($0)") })
        #expect(big.lostRefusals(answeredThrough: 2))
    }

    @Test func theStoredFormRoundTripsAndHostileBytesAreErrors() throws {
        var l = RefusalLedger()
        #expect(try RefusalLedger.decode([]) == l)
        #expect(try RefusalLedger.decode(l.encoded) == l)
        l.record(through: 3, writes: [Self.w("a"), CompensatingWrite(objectType: "Item", primaryKey: .int(-4), reason: "r")])
        l.record(through: 1 << 40, writes: [Self.w("é")], maxWrites: 2)
        let bytes = l.encoded
        #expect(try RefusalLedger.decode(bytes) == l)
        for n in 1..<bytes.count { #expect(throws: FerryError.self) { try RefusalLedger.decode(Array(bytes.prefix(n))) } }
        for i in bytes.indices {
            var bad = bytes
            bad[i] ^= 0xff
            _ = try? RefusalLedger.decode(bad)  // an error or another ledger, never a trap
        }
        #expect(throws: FerryError.self) { try RefusalLedger.decode(bytes + [0]) }
        #expect(throws: FerryError.self) { try RefusalLedger.decode([2]) }
        // Records out of order are refused (they are written in order).
        #expect(throws: FerryError.self) { try RefusalLedger.decode([1, 0, 2, 5, 0, 3, 0]) }
        // A count far beyond the bytes is refused before anything is allocated for it.
        #expect(throws: FerryError.self) { try RefusalLedger.decode([1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]) }
    }
}
