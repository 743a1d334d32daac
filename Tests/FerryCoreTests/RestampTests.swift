import FerryCore
import Testing

/// The server merges an upload outside its write lock at a provisional version and stamps the
/// real one at commit (`StampedObject.restamp`, `ListOperationLog.restamp`). That is only
/// right if the merge's outcome does not depend on which version it ran at, as long as the
/// version is above every base and every version already stored. Randomized: each step is
/// merged at its real version into one copy, and at the provisional version then restamped
/// into another; the copies must agree after every step, in values, stamps, versions and
/// list operations, and in which steps fail.
@Suite("Merge at a provisional version, restamped")
struct RestampTests {
    static let os = TestSchemas.item
    static let key = FerryValue.objectId(try! ObjectId(bytes: [UInt8](repeating: 9, count: 12)))
    static let provisional = UInt64(Int64.max)

    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    static func instruction(_ g: inout Generator, listCount: Int) -> Instruction {
        let t = "Item"
        switch g.next(9) {
        case 0: return .create(table: t, key: key, fields: [FieldValue(name: "ownerId", value: .string("u1")),
                                                            FieldValue(name: "itemName", value: .string("n\(g.next(5))"))])
        case 1: return .erase(table: t, key: key)
        case 2: return .set(table: t, key: key, field: "itemName", value: .string("s\(g.next(50))"))
        case 3: return .addInteger(table: t, key: key, field: "complexity", delta: Int64(g.next(7)) - 3)
        case 4, 5: return .listInsert(table: t, key: key, field: "tags", index: g.next(listCount + 1), value: .string("t\(g.next(50))"))
        case 6: return .listSet(table: t, key: key, field: "tags", index: g.next(max(listCount, 1)), value: .string("x\(g.next(50))"))
        case 7: return .listErase(table: t, key: key, field: "tags", index: g.next(max(listCount, 1)))
        default: return .listClear(table: t, key: key, field: "tags")
        }
    }

    @Test(arguments: 1...40) func aMergeRestampedIsTheMergeAtTheRealVersion(seed: Int) throws {
        var g = Generator(state: UInt64(seed) &* 0x9E3779B97F4A7C15)
        var real: StampedObject?, realLists = ListOperationLog()
        var restamped: StampedObject?, restampedLists = ListOperationLog()
        var version: UInt64 = 10
        for _ in 0..<120 {
            version += 1
            let listCount: Int = { if case .list(let l)? = real?.values[5] { l.count } else { 0 } }()
            let stamp = Stamp(timestamp: 1_000 + Int64(g.next(400)), fileIdent: UInt64(1 + g.next(3)))
            // The uploader had integrated some version up to the last commit.
            let base = UInt64(g.next(Int(version)))
            let instruction = Self.instruction(&g, listCount: listCount)
            let a = Result { try ObjectMerge.apply(instruction, to: &real, schema: Self.os, stamp: stamp, base: base, version: version, lists: &realLists) }
            var candidate = restamped, candidateLists = restampedLists
            let b = Result { try ObjectMerge.apply(instruction, to: &candidate, schema: Self.os, stamp: stamp, base: base,
                                                   version: Self.provisional, lists: &candidateLists) }
            candidate?.restamp(Self.provisional, to: version)
            candidateLists.restamp(Self.provisional, to: version)
            switch (a, b) {
            case (.success(let x), .success(let y)): #expect(x == y)
            case (.failure, .failure): break
            default: Issue.record("seed \(seed): \(instruction) failed at one version and not at the other"); return
            }
            // A failed step leaves the objects as they were (a changeset that fails is not
            // stored): take the real merge's state as it stands.
            if case .failure = a {
                candidate = real
                candidateLists = realLists
            }
            restamped = candidate
            restampedLists = candidateLists
            #expect(restamped == real, "seed \(seed), version \(version): \(instruction)")
            #expect(restampedLists == realLists, "seed \(seed), version \(version): list operations differ")
            if restamped != real || restampedLists != realLists { return }
        }
    }

    @Test func restampMovesOnlyTheProvisionalVersion() {
        var o = StampedObject(values: [.int(1), .int(2), .int(3)], stamps: Array(repeating: Stamp(timestamp: 1, fileIdent: 1), count: 3),
                              versions: [4, Self.provisional, 7])
        o.restamp(Self.provisional, to: 12)
        #expect(o.versions == [4, 12, 7])
        var log = ListOperationLog()
        log.record(.insert(0), property: 5, version: 3, origin: 1)
        log.record(.insert(1), property: 5, version: Self.provisional, origin: 2)
        log.restamp(Self.provisional, to: 12)
        #expect(log.entries.map(\.version) == [3, 12])
    }
}
