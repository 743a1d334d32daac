import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import FerryCore
import Testing

/// Generated ObjectIds. Issue 11, point 11: primary keys are global per class, so one id seen
/// must not let anyone predict (and create first) the next ones. Issue 23: ids made in one
/// process are strictly increasing (seconds, a counter, 40 random bits), so inserts append to
/// a primary key's B-tree.
@Suite("ObjectId generation")
struct ObjectIdTests {
    /// The 8 bytes after the time prefix, as a number.
    static func randomPart(_ id: ObjectId) -> UInt64 { id.array[4...].reduce(0) { $0 << 8 | UInt64($1) } }
    /// Bytes 4..<7: the counter within the second.
    static func counter(_ id: ObjectId) -> UInt32 { id.array[4..<7].reduce(0) { $0 << 8 | UInt32($1) } }
    /// Bytes 7..<12: the 40 bits drawn for each id.
    static func tail(_ id: ObjectId) -> UInt64 { id.array[7...].reduce(0) { $0 << 8 | UInt64($1) } }
    static func seconds(_ id: ObjectId) -> UInt32 { id.array[..<4].reduce(0) { $0 << 8 | UInt32($1) } }

    @Test func theTimePrefixIsTheSecondsBigEndian() {
        let g = ObjectId.Generator()
        let id = g.next(secondsSinceEpoch: 0x6601_02ff)
        #expect(Array(id.array[..<4]) == [0x66, 0x01, 0x02, 0xff])
        #expect(id.array.count == 12)
        // A later second is the next id's prefix, and its counter starts again in the lower half.
        let later = g.next(secondsSinceEpoch: 0x6601_0300)
        #expect(Array(later.array[..<4]) == [0x66, 0x01, 0x03, 0x00])
        #expect(Self.counter(later) < 1 << 23)
    }

    /// The process-wide generator (the one `ferry_object_id_generate` uses) puts today's second
    /// first. Only today's: a later second would move every id of the test process after it.
    @Test func theSharedGeneratorUsesTodaysSecond() {
        let now = UInt32(truncatingIfNeeded: time(nil))
        let id = ObjectId.generate(secondsSinceEpoch: now)
        #expect((now...now + 2).contains(Self.seconds(id)), "prefix \(Self.seconds(id)), now \(now)")
    }

    @Test func consecutiveIdsShareNoPredictableRelation() {
        let ids = (0..<10_000).map { _ in ObjectId.generate(secondsSinceEpoch: 1_700_000_000) }
        #expect(Set(ids).count == ids.count, "duplicates among 10,000 ids")
        var counterSteps = 0, equalTails = 0
        for (a, b) in zip(ids, ids.dropFirst()) {
            if Self.tail(a) == Self.tail(b) { equalTails += 1 }
            // MongoDB's layout: a 3-byte counter at the end.
            let ca = Self.randomPart(a) & 0xff_ffff, cb = Self.randomPart(b) & 0xff_ffff
            if cb == (ca + 1) & 0xff_ffff { counterSteps += 1 }
        }
        // By chance, each pair steps its last 3 bytes by one with probability 2^-24 and repeats
        // its 40 random bits with 2^-40: over 9,999 pairs a second one is as good as impossible.
        #expect(counterSteps <= 1, "\(counterSteps) consecutive ids step a counter in their last bytes")
        #expect(equalTails <= 1, "\(equalTails) consecutive ids share their random bits")
    }

    /// Every one of the 40 random bits is set in about half of the ids (the bound is 10
    /// standard deviations of a fair coin over 10,000 draws): no bit of the tail is fixed or counts.
    @Test func everyRandomBitIsACoinFlip() {
        var ones = [Int](repeating: 0, count: 40)
        for _ in 0..<10_000 {
            let r = Self.tail(ObjectId.generate(secondsSinceEpoch: 1_700_000_000))
            for bit in 0..<40 where r >> UInt64(bit) & 1 == 1 { ones[bit] += 1 }
        }
        let skewed = ones.enumerated().filter { !(4_500...5_500).contains($0.element) }
        #expect(skewed.isEmpty, "bits set in a skewed share of 10,000 ids: \(skewed)")
    }

    /// Each second's counter starts at a random value: over 200 seconds, the starts are spread
    /// (two devices' first ids in a second do not share a counter, as a start at 0 would).
    @Test func eachSecondStartsItsCounterAtARandomValue() {
        let g = ObjectId.Generator()
        let starts = (0..<200).map { Self.counter(g.next(secondsSinceEpoch: 1_700_000_000 + UInt32($0))) }
        #expect(starts.allSatisfy { $0 < 1 << 23 })
        #expect(Set(starts).count >= 195, "counter starts repeat: \(Set(starts).count) distinct of 200")
    }

    @Test func idsAreStrictlyIncreasing() {
        let g = ObjectId.Generator()
        var previous = g.next(secondsSinceEpoch: 1_700_000_000)
        // Within one second, across seconds, and when the clock goes back a second.
        for i in 1..<100_000 {
            let second: UInt32 = i < 50_000 ? 1_700_000_000 : i < 80_000 ? 1_700_000_001 : 1_700_000_000
            let id = g.next(secondsSinceEpoch: second)
            #expect(previous < id, "id \(i) \(id) is not above \(previous)")
            if !(previous < id) { return }
            previous = id
        }
        // The clock went back: the prefix stayed at the later second.
        #expect(Self.seconds(previous) == 1_700_000_001)
    }

    @Test func theSharedGeneratorIsStrictlyIncreasing() {
        var previous = ObjectId.generate(secondsSinceEpoch: 1_700_000_000)
        var bad = 0
        for _ in 0..<50_000 {
            let id = ObjectId.generate(secondsSinceEpoch: 1_700_000_000)
            if !(previous < id) { bad += 1 }
            previous = id
        }
        #expect(bad == 0)
    }

    /// When a second's counter runs out, the next id takes the next second (ahead of the
    /// clock) and order holds.
    @Test func aFullCounterMovesToTheNextSecond() {
        let g = ObjectId.Generator(counterBits: 4)
        var previous = g.next(secondsSinceEpoch: 1_700_000_000)
        for _ in 0..<40 {
            let id = g.next(secondsSinceEpoch: 1_700_000_000)
            #expect(previous < id)
            previous = id
        }
        #expect(Self.seconds(previous) > 1_700_000_000)
    }

    /// Four threads draw from one generator at once: each thread's ids are strictly
    /// increasing, and the counters of all of them are one contiguous run (no two threads got
    /// the same counter, none was skipped).
    @Test func concurrentThreadsNeverGetTheSameOrADecreasingId() {
        let g = ObjectId.Generator()
        let threads = 4, perThread = 20_000
        final class Box: @unchecked Sendable { var ids = [[ObjectId]](repeating: [], count: 4) }
        let box = Box()
        let lock = ThreadLock()
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            var mine = [ObjectId]()
            mine.reserveCapacity(perThread)
            for _ in 0..<perThread { mine.append(g.next(secondsSinceEpoch: 1_700_000_000)) }
            lock.withLock { box.ids[t] = mine }
        }
        for mine in box.ids {
            #expect(mine.count == perThread)
            #expect(zip(mine, mine.dropFirst()).allSatisfy { $0 < $1 }, "a thread's ids are not increasing")
        }
        let counters = box.ids.joined().map(Self.counter).sorted()
        #expect(counters.count == threads * perThread)
        #expect(zip(counters, counters.dropFirst()).allSatisfy { $1 == $0 + 1 }, "counters repeat or skip")
    }
}
