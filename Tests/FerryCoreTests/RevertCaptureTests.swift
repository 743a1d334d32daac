@testable import FerryCore
import Testing

/// What a captured object says the revert took (SPEC F-NOLOSS), without a server: the oracle
/// is the before and after states and the writes the test lays down. The end-to-end cases are
/// in FerryClientTests/CompensatingWriteLossTests.
@Suite("Compensating writes: what a capture reports")
struct RevertCaptureTests {
    static let doc = try! ObjectSchema(name: "Doc", properties: [
        Property(name: "_id", type: .string, isPrimaryKey: true),
        Property(name: "owner", type: .string),
        Property(name: "rank", type: .int),
        Property(name: "tags", type: .string, isList: true),
    ])
    static let key = FerryValue.string("d")

    func capture(_ before: [FerryValue]?, _ after: [FerryValue]?, _ writes: [(UInt64, Instruction)]) -> RevertCapture {
        RevertCapture(objectSchema: Self.doc, primaryKey: Self.key, before: before, after: after,
                      writes: writes.map { LocalWrite(version: $0.0, instruction: $0.1) })
    }

    func row(_ owner: String, _ rank: Int64, _ tags: [String]) -> [FerryValue] {
        [Self.key, .string(owner), .int(rank), .list(tags.map { .string($0) })]
    }

    @Test func aRemovedObjectReportsEveryPropertyAndEveryWriteButErases() {
        let create = Instruction.create(table: "Doc", key: Self.key, fields: [FieldValue(name: "owner", value: .string("x"))])
        let insert = Instruction.listInsert(table: "Doc", key: Self.key, field: "tags", index: 0, value: .string("a"))
        let r = capture(row("x", 1, ["a"]), nil, [(3, create), (4, insert)]).reverted
        #expect(r == RevertedObject(objectType: "Doc", primaryKey: Self.key, revert: .removed, values: [
            RevertedValue(property: 1, name: "owner", value: .string("x")),
            RevertedValue(property: 2, name: "rank", value: .int(1)),
            RevertedValue(property: 3, name: "tags", value: .list([.string("a")])),
        ], writes: [LocalWrite(version: 3, instruction: create), LocalWrite(version: 4, instruction: insert)]))
    }

    @Test func aChangedObjectReportsOnlyWhatWasSetBackAndTheWritesToIt() {
        let owner = Instruction.set(table: "Doc", key: Self.key, field: "owner", value: .string("x"))
        let rank = Instruction.set(table: "Doc", key: Self.key, field: "rank", value: .int(5))
        let tag = Instruction.listInsert(table: "Doc", key: Self.key, field: "tags", index: 1, value: .string("b"))
        let r = capture(row("x", 5, ["a", "b"]), row("me", 5, ["a"]), [(7, owner), (8, rank), (9, tag)]).reverted
        #expect(r?.revert == .changed)
        #expect(r?.values == [RevertedValue(property: 1, name: "owner", value: .string("x")),
                              RevertedValue(property: 3, name: "tags", value: .list([.string("a"), .string("b")]))])
        #expect(r?.writes.map(\.version) == [7, 9])
    }

    @Test func aRestoredObjectReportsTheDelete() {
        let erase = Instruction.erase(table: "Doc", key: Self.key)
        let set = Instruction.set(table: "Doc", key: Self.key, field: "rank", value: .int(2))
        let r = capture(nil, row("me", 1, []), [(2, set), (3, erase)]).reverted
        #expect(r == RevertedObject(objectType: "Doc", primaryKey: Self.key, revert: .restored, values: [],
                                    writes: [LocalWrite(version: 3, instruction: erase)]))
    }

    @Test func anObjectThatEndsAsTheDeviceHadItLostNothing() {
        let set = Instruction.set(table: "Doc", key: Self.key, field: "rank", value: .int(2))
        #expect(capture(row("me", 2, []), row("me", 2, []), [(2, set)]).reverted == nil)
        #expect(capture(nil, nil, [(2, set)]).reverted == nil)
    }

    @Test func aCaptureFollowedByTheNextMessageKeepsTheFirstBeforeAndTheLastAfter() {
        let set = Instruction.set(table: "Doc", key: Self.key, field: "rank", value: .int(9))
        let first = capture(row("me", 9, []), row("me", 4, []), [(5, set)])
        let second = capture(row("me", 4, []), nil, [(5, set)])
        let r = first.followed(by: second).reverted
        #expect(r?.revert == .removed)
        #expect(r?.values.first { $0.name == "rank" }?.value == .int(9))
        #expect(r?.writes.map(\.version) == [5])
    }
}
