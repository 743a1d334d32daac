import FerryCore
import Testing

/// The server's merge rules (docs/protocol.md, "Merge") on one object: the writes of one
/// changeset apply in their order, a client file's later changesets win over its earlier ones
/// whatever their timestamps, a writer that had seen the current value wins over it, and only
/// concurrent writes are decided by their stamps.
@Suite("Merge of one object")
struct ObjectMergeTests {
    static let os = TestSchemas.item
    static let key = FerryValue.objectId(try! ObjectId(bytes: [UInt8](repeating: 7, count: 12)))
    static let now: Int64 = 1_750_000_000_000_000_000

    /// The object after `steps` (instruction, stamp, base), each at the next server version.
    static func merge(_ start: StampedObject?, _ steps: [(Instruction, Stamp, UInt64)], firstVersion: UInt64 = 10) throws -> StampedObject? {
        var object = start
        var lists = ListOperationLog()
        for (n, (instruction, stamp, base)) in steps.enumerated() {
            try ObjectMerge.apply(instruction, to: &object, schema: os, stamp: stamp, base: base,
                                  version: firstVersion + UInt64(n), lists: &lists)
        }
        return object
    }

    static func create(_ fields: [(String, FerryValue)]) -> Instruction {
        .create(table: "Item", key: key, fields: fields.map { FieldValue(name: $0.0, value: $0.1) })
    }
    static func set(_ field: String, _ value: FerryValue) -> Instruction { .set(table: "Item", key: key, field: field, value: value) }
    static func add(_ field: String, _ delta: Int64) -> Instruction { .addInteger(table: "Item", key: key, field: field, delta: delta) }

    /// An existing object, every property written by `stamp` at server version `version`.
    static func existing(complexity: Int64 = 1, name: String = "start", stamp: Stamp, version: UInt64 = 5) -> StampedObject {
        var values = TestSchemas.row(7, owner: "u1", name: name, complexity: complexity)
        values[0] = key
        return StampedObject(values: values, stamps: Array(repeating: stamp, count: values.count),
                             versions: Array(repeating: version, count: values.count))
    }

    static let complexity = os.propertyIndex(named: "complexity")!
    static let itemName = os.propertyIndex(named: "itemName")!

    // MARK: one changeset: its instructions apply in their order

    @Test func aSetAfterTheCreateInOneChangesetWins() throws {
        let s = Stamp(timestamp: Self.now, fileIdent: 3)
        // One changeset: every instruction carries its stamp and is merged at the same version.
        var object: StampedObject?
        var lists = ListOperationLog()
        try ObjectMerge.apply(Self.create([("ownerId", .string("u1")), ("itemName", .string("draft")), ("complexity", .int(3))]),
                              to: &object, schema: Self.os, stamp: s, base: 0, version: 1, lists: &lists)
        let outcome = try ObjectMerge.apply(Self.set("complexity", .int(4)), to: &object, schema: Self.os, stamp: s, base: 0, version: 1, lists: &lists)
        #expect(outcome == .applied)
        #expect(object?.values[Self.complexity] == .int(4))
        #expect(object?.values[Self.itemName] == .string("draft"))
    }

    @Test func theSecondOfTwoSetsInOneChangesetWins() throws {
        let s = Stamp(timestamp: Self.now, fileIdent: 3)
        var object: StampedObject? = Self.existing(stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        var lists = ListOperationLog()
        for value in ["first", "second"] {
            try ObjectMerge.apply(Self.set("itemName", .string(value)), to: &object, schema: Self.os, stamp: s, base: 5, version: 6, lists: &lists)
        }
        #expect(object?.values[Self.itemName] == .string("second"))
    }

    @Test func aSetAfterACreateThatMergedIntoAnExistingObjectWins() throws {
        // The key exists already (another device created it concurrently): the create merges
        // field by field, then the same changeset's set applies on top.
        let s = Stamp(timestamp: Self.now, fileIdent: 3)
        var object: StampedObject? = Self.existing(stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        var lists = ListOperationLog()
        try ObjectMerge.apply(Self.create([("ownerId", .string("u1")), ("itemName", .string("mine")), ("complexity", .int(2))]),
                              to: &object, schema: Self.os, stamp: s, base: 0, version: 6, lists: &lists)
        try ObjectMerge.apply(Self.set("itemName", .string("renamed")), to: &object, schema: Self.os, stamp: s, base: 0, version: 6, lists: &lists)
        try ObjectMerge.apply(Self.set("complexity", .int(3)), to: &object, schema: Self.os, stamp: s, base: 0, version: 6, lists: &lists)
        #expect(object?.values[Self.itemName] == .string("renamed"))
        #expect(object?.values[Self.complexity] == .int(3))
    }

    @Test func anAddThenASetAndASetThenAnAddInOneChangesetApplyInOrder() throws {
        let s = Stamp(timestamp: Self.now, fileIdent: 3)
        let start = Self.existing(complexity: 1, stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        let setThenAdd = try Self.merge(start, [(Self.set("complexity", .int(5)), s, 5), (Self.add("complexity", 2), s, 5)])
        #expect(setThenAdd?.values[Self.complexity] == .int(7))
        let addThenSet = try Self.merge(start, [(Self.add("complexity", 2), s, 5), (Self.set("complexity", .int(5)), s, 5)])
        #expect(addThenSet?.values[Self.complexity] == .int(5))
    }

    // MARK: one client file: its later changesets win

    @Test func aLaterChangesetOfTheSameFileWinsWithAnEqualOrEarlierTimestamp() throws {
        // The server bounds a client's timestamps by its own clock, so one file's changesets
        // may carry equal or even decreasing stamps; they still happened in upload order. The
        // second write's base (0) shows it had not integrated the first one's server version.
        let start = Self.existing(stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        for later in [Self.now, Self.now - 500] {
            let o = try Self.merge(start, [(Self.set("itemName", .string("first")), Stamp(timestamp: Self.now, fileIdent: 3), 5),
                                           (Self.set("itemName", .string("second")), Stamp(timestamp: later, fileIdent: 3), 5)])
            #expect(o?.values[Self.itemName] == .string("second"))
            let added = try Self.merge(start, [(Self.set("complexity", .int(5)), Stamp(timestamp: Self.now, fileIdent: 3), 5),
                                               (Self.add("complexity", 1), Stamp(timestamp: later, fileIdent: 3), 5)])
            #expect(added?.values[Self.complexity] == .int(6))
        }
    }

    // MARK: causality before clocks

    @Test func aWriterThatHadSeenTheValueWinsOverAFutureStamp() throws {
        // Written at server version 5 with a stamp from a broken clock, years ahead; another
        // file that had integrated version 5 writes afterwards: it comes later, whatever the
        // clocks say, and its own stamp replaces the broken one.
        let future = Stamp(timestamp: Self.now + 10 * 365 * 86_400 * 1_000_000_000, fileIdent: 2)
        let start = Self.existing(complexity: 1, stamp: future, version: 5)
        let later = Stamp(timestamp: Self.now, fileIdent: 3)
        let o = try Self.merge(start, [(Self.set("itemName", .string("later")), later, 5), (Self.add("complexity", 2), later, 5)])
        #expect(o?.values[Self.itemName] == .string("later"))
        #expect(o?.stamps[Self.itemName] == later)
        #expect(o?.values[Self.complexity] == .int(3))
        // And a third file, concurrent with that write (it had not seen it), is judged against
        // the new stamp, not the broken one.
        let third = try Self.merge(o, [(Self.set("itemName", .string("third")), Stamp(timestamp: Self.now + 1, fileIdent: 4), 5)], firstVersion: 20)
        #expect(third?.values[Self.itemName] == .string("third"))
    }

    @Test func concurrentSetsAreLastWriterWinsInEitherOrder() throws {
        // Neither writer had seen the other's write (both on base 5): the later stamp wins,
        // whichever arrives first.
        let start = Self.existing(stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        let early = (Self.set("itemName", .string("early")), Stamp(timestamp: Self.now, fileIdent: 4), UInt64(5))
        let late = (Self.set("itemName", .string("late")), Stamp(timestamp: Self.now + 1, fileIdent: 3), UInt64(5))
        #expect(try Self.merge(start, [early, late])?.values[Self.itemName] == .string("late"))
        #expect(try Self.merge(start, [late, early])?.values[Self.itemName] == .string("late"))
        // Equal timestamps: the higher file ident, in either order.
        let tie = (Self.set("itemName", .string("tie")), Stamp(timestamp: Self.now, fileIdent: 9), UInt64(5))
        #expect(try Self.merge(start, [early, tie])?.values[Self.itemName] == .string("tie"))
        #expect(try Self.merge(start, [tie, early])?.values[Self.itemName] == .string("tie"))
    }

    @Test func concurrentAddsSumAndAnAddConcurrentWithANewerSetIsDropped() throws {
        let start = Self.existing(complexity: 1, stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        let sum = try Self.merge(start, [(Self.add("complexity", 2), Stamp(timestamp: Self.now, fileIdent: 3), 5),
                                         (Self.add("complexity", 3), Stamp(timestamp: Self.now - 10, fileIdent: 4), 5)])
        #expect(sum?.values[Self.complexity] == .int(6))
        let dropped = try Self.merge(start, [(Self.set("complexity", .int(9)), Stamp(timestamp: Self.now, fileIdent: 3), 5),
                                             (Self.add("complexity", 3), Stamp(timestamp: Self.now - 10, fileIdent: 4), 5)])
        #expect(dropped?.values[Self.complexity] == .int(9))
        // The adder had seen the set (its base is the set's version 10): the add applies.
        let seen = try Self.merge(start, [(Self.set("complexity", .int(9)), Stamp(timestamp: Self.now, fileIdent: 3), 5),
                                          (Self.add("complexity", 3), Stamp(timestamp: Self.now - 10, fileIdent: 4), 10)])
        #expect(seen?.values[Self.complexity] == .int(12))
    }

    @Test func anEraseWinsAndACreateAfterItStartsANewObject() throws {
        let s = Stamp(timestamp: Self.now, fileIdent: 3)
        let start = Self.existing(stamp: Stamp(timestamp: Self.now - 1_000, fileIdent: 2))
        let erased = try Self.merge(start, [(.erase(table: "Item", key: Self.key), Stamp(timestamp: Self.now - 5_000, fileIdent: 4), 0),
                                            (Self.set("itemName", .string("late")), s, 5)])
        #expect(erased == nil)
        let recreated = try Self.merge(start, [(.erase(table: "Item", key: Self.key), s, 5),
                                               (Self.create([("ownerId", .string("u1")), ("complexity", .int(2))]), s, 5),
                                               (Self.set("complexity", .int(3)), s, 5)])
        #expect(recreated?.values[Self.complexity] == .int(3))
        #expect(recreated?.values[Self.itemName] == .string(""))
    }
}
