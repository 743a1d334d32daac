import FerryCore
import Testing

/// Generated ObjectIds (issue 11, point 11): primary keys are global per class, so one id seen
/// must not let anyone predict (and create first) the next ones.
@Suite("ObjectId generation")
struct ObjectIdTests {
    /// The 8 bytes after the time prefix, as a number.
    static func randomPart(_ id: ObjectId) -> UInt64 { id.array[4...].reduce(0) { $0 << 8 | UInt64($1) } }

    @Test func theTimePrefixIsTheSecondsBigEndian() {
        let id = ObjectId.generate(secondsSinceEpoch: 0x6601_02ff)
        #expect(Array(id.array[..<4]) == [0x66, 0x01, 0x02, 0xff])
        #expect(id.array.count == 12)
    }

    @Test func consecutiveIdsShareNoPredictableRelation() {
        let ids = (0..<10_000).map { _ in ObjectId.generate(secondsSinceEpoch: 1_700_000_000) }
        #expect(Set(ids).count == ids.count, "duplicates among 10,000 ids")
        var counterSteps = 0, equalMiddles = 0
        for (a, b) in zip(ids, ids.dropFirst()) {
            #expect(Self.randomPart(a) != Self.randomPart(b))
            // MongoDB's layout: bytes 4..<9 fixed per process, a 3-byte counter at the end.
            if Array(a.array[4..<9]) == Array(b.array[4..<9]) { equalMiddles += 1 }
            let ca = Self.randomPart(a) & 0xff_ffff, cb = Self.randomPart(b) & 0xff_ffff
            if cb == (ca + 1) & 0xff_ffff { counterSteps += 1 }
        }
        // By chance, each pair steps its last 3 bytes by one with probability 2^-24 and repeats
        // bytes 4..<9 with 2^-40: over 9,999 pairs a second one is as good as impossible.
        #expect(counterSteps <= 1, "\(counterSteps) consecutive ids step a counter")
        #expect(equalMiddles == 0, "\(equalMiddles) consecutive ids share bytes 4..<9")
    }

    /// Every one of the 64 bits is set in about half of the ids (the bound is 10 standard
    /// deviations of a fair coin over 10,000 draws): no byte is fixed or counts.
    @Test func everyRandomBitIsACoinFlip() {
        var ones = [Int](repeating: 0, count: 64)
        for _ in 0..<10_000 {
            let r = Self.randomPart(ObjectId.generate(secondsSinceEpoch: 1_700_000_000))
            for bit in 0..<64 where r >> UInt64(bit) & 1 == 1 { ones[bit] += 1 }
        }
        let skewed = ones.enumerated().filter { !(4_500...5_500).contains($0.element) }
        #expect(skewed.isEmpty, "bits set in a skewed share of 10,000 ids: \(skewed)")
    }
}
