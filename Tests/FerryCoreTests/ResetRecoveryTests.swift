@testable import FerryCore
import Testing

/// Client-reset recovery decided from values (`ResetRecovery`): each rule of SPEC F-RECOVERY on
/// one object, and the fate of each unsynced changeset's write receipt. The store's reset tests
/// (FerryStoreTests) and the sync reset tests run the same rules through SQLite and a server.
@Suite struct ResetRecoveryTests {
    let os = TestSchemas.item
    var device: [FerryValue] { TestSchemas.row(1, owner: "u", name: "device", complexity: 5, tags: ["a", "b"]) }
    var server: [FerryValue] { TestSchemas.row(1, owner: "u", name: "server", complexity: 3, tags: ["s"]) }
    var ref: ObjectKey { ObjectKey(table: "Item", key: device[0]) }

    func set(_ field: String, _ value: FerryValue) -> Instruction { .set(table: "Item", key: ref.key, field: field, value: value) }
    var create: Instruction { .create(table: "Item", key: ref.key, fields: ResetRecovery.fields(of: device, os)) }

    @Test func createdHereAndUnknownToTheServerIsCreated() {
        let (out, entry) = ResetRecovery.recover(ref, [create], device: device, current: nil, schema: os)
        #expect(out == [create])
        #expect(entry == .init(objectType: "Item", primaryKey: ref.key, outcome: .recovered, reason: "created on this device and not yet synced"))
    }

    @Test func updatedHereButGoneFromTheServerStaysDeleted() {
        let (out, entry) = ResetRecovery.recover(ref, [set("itemName", .string("device"))], device: device, current: nil, schema: os)
        #expect(out.isEmpty)
        #expect(entry.outcome == .discarded && entry.reason == "deleted on the server: the device's updates to it are discarded")
    }

    @Test func deletedHereIsDeleted() {
        let erase = Instruction.erase(table: "Item", key: ref.key)
        let (out, entry) = ResetRecovery.recover(ref, [erase], device: nil, current: server, schema: os)
        #expect(out == [erase] && entry.reason == "deleted on this device")
        let (none, gone) = ResetRecovery.recover(ref, [erase], device: nil, current: nil, schema: os)
        #expect(none.isEmpty && gone.reason == "deleted on this device and on the server")
        let (nothing, both) = ResetRecovery.recover(ref, [create, erase], device: nil, current: nil, schema: os)
        #expect(nothing.isEmpty && both.reason == "created and deleted on this device: nothing to upload")
    }

    @Test func theDevicesFieldsWinAndOnlyWhereTheyDiffer() {
        // The device set the name and the list; the complexity it did not touch keeps the server's.
        let ops = [set("itemName", .string("device")), Instruction.listInsert(table: "Item", key: ref.key, field: "tags", index: 0, value: .string("a"))]
        let (out, entry) = ResetRecovery.recover(ref, ops, device: device, current: server, schema: os)
        #expect(out == [
            set("itemName", .string("device")),
            .listClear(table: "Item", key: ref.key, field: "tags"),
            .listInsert(table: "Item", key: ref.key, field: "tags", index: 0, value: .string("a")),
            .listInsert(table: "Item", key: ref.key, field: "tags", index: 1, value: .string("b")),
        ])
        #expect(entry.reason == "the device's updates applied over the server's: itemName, tags")
        // A field the server already holds as the device does is not written again.
        let (same, already) = ResetRecovery.recover(ref, [set("itemName", .string("server"))], device: server, current: server, schema: os)
        #expect(same.isEmpty && already.reason == "the server already has the device's changes")
    }

    @Test func integerAddsAreReplayedUnlessTheFieldWasSet() {
        let add = Instruction.addInteger(table: "Item", key: ref.key, field: "complexity", delta: 2)
        let (out, _) = ResetRecovery.recover(ref, [add, add], device: device, current: server, schema: os)
        #expect(out == [.addInteger(table: "Item", key: ref.key, field: "complexity", delta: 4)])
        // A set after the adds decided the value: the device's value is set, no add.
        let (setWins, _) = ResetRecovery.recover(ref, [add, set("complexity", .int(5))], device: device, current: server, schema: os)
        #expect(setWins == [set("complexity", .int(5))])
        // Adds that cancel out change nothing.
        let (zero, entry) = ResetRecovery.recover(ref, [add, .addInteger(table: "Item", key: ref.key, field: "complexity", delta: -2)],
                                                  device: server, current: server, schema: os)
        #expect(zero.isEmpty && entry.outcome == .recovered)
    }

    @Test func receiptsOfDiscardedObjectsAreRejectedAndTheRestFollowTheRecoveredChangeset() {
        let a = ObjectKey(table: "Item", key: .string("a")), b = ObjectKey(table: "Item", key: .string("b"))
        let entries: [ClientResetReport.Entry] = [
            .init(objectType: "Item", primaryKey: .string("b"), outcome: .discarded, reason: "deleted on the server"),
            .init(objectType: "Item", primaryKey: .string("a"), outcome: .recovered, reason: "created on this device and not yet synced"),
        ]
        let fates = ResetRecovery.receiptFates([(1, [a]), (2, [a, b]), (3, [])], entries: entries, recoveredVersion: 9)
        #expect(fates.map(\.version) == [1, 2, 3])
        #expect(fates[0].fate == .follows(version: 9))
        #expect(fates[1].fate == .rejected([CompensatingWrite(objectType: "Item", primaryKey: .string("b"), reason: "discarded by a client reset: deleted on the server")]))
        #expect(fates[2].fate == .follows(version: 9))
        // Nothing recovered: the rest keep their receipts as they are.
        #expect(ResetRecovery.receiptFates([(1, [a])], entries: entries, recoveredVersion: 0)[0].fate == .unchanged)
    }
}
