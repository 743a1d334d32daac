import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// The pure merge and validation of an upload (`UploadIntegration`), without storage or a
/// server: stored states in, merged states and compensating writes out.
@Suite("Server: upload integration without I/O")
struct UploadIntegrationTests {
    let app = try! AppDirectory.load(AuthAPITests.example)
    var item: ObjectSchema { try! app.schema.objectSchema(named: "Item")! }
    let alice = UserContext(id: "alice")

    func view(_ query: String = "complexity <= 4") throws -> SessionView {
        try SessionView.make([Subscription(name: "s", objectType: "Item", query: query)], user: alice, app: app, schema: app.schema).get()
    }

    func create(_ hex: String, owner: String, complexity: Int64) throws -> Instruction {
        .create(table: "Item", key: .objectId(try ObjectId(hex: hex)), fields: [
            FieldValue(name: "ownerId", value: .string(owner)), FieldValue(name: "itemName", value: .string("x")),
            FieldValue(name: "complexity", value: .int(complexity)),
        ])
    }

    func upload(_ version: UInt64, base: UInt64 = 0, _ instructions: [Instruction]) -> UploadChangeset {
        UploadChangeset(clientVersion: version, lastIntegratedServerVersion: base,
                        changeset: ChangesetCodec.encode(Changeset(timestamp: 1_000, instructions: instructions)))
    }

    func integration(acknowledged: UInt64 = 0, _ changesets: [UploadChangeset]) throws -> UploadIntegration {
        try UploadIntegration(session: 1, clientFile: 7, user: alice, view: try view(), app: app, schema: try app.schema,
                              acknowledged: acknowledged, changesets: changesets)
    }

    @Test func aPermittedCreateIsStoredAtTheGivenVersion() throws {
        let i = try integration([upload(1, [try create("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 2)])])
        let key = ObjectKey(table: "Item", key: .objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b")))
        #expect(i.keys == [key])
        let outcome = try i.integrate(stored: [:], version: 42)
        #expect(outcome.compensating.isEmpty)
        #expect(outcome.lastClientVersion == 1)
        let stored = try #require(outcome.toStore[key]?.object)
        #expect(stored.versions.contains(42))
        #expect(stored.values[try #require(item.propertyIndex(named: "complexity"))] == .int(2))
        #expect(outcome.entries[key]?.exact == true)
    }

    @Test func writesOutsideTheViewOrPermissionAreCompensatedAndNotStored() throws {
        let i = try integration([upload(1, [
            try create("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 7),
            try create("65a1b2c3d4e5f60718293a4c", owner: "bob", complexity: 2),
        ])])
        let outcome = try i.integrate(stored: [:], version: 5)
        #expect(outcome.toStore.isEmpty)
        #expect(outcome.compensating.map(\.reason) == [
            "write to \"65a1b2c3d4e5f60718293a4b\" in table \"Item\" not allowed; object is outside of the current query view",
            "write to \"65a1b2c3d4e5f60718293a4c\" in table \"Item\" was denied by write filter in role \"owner-read-write\"",
        ])
        #expect(outcome.entries.values.allSatisfy { $0.rejected })
    }

    /// Issue 22, point 5: a set or erase of another user's object, one this user may not read,
    /// is answered exactly as the same write to a key that does not exist: no compensating
    /// write (a 231 would tell the user the key exists), nothing stored, the same flags.
    @Test func aWriteToAnUnreadableObjectIsAnsweredAsAWriteToAMissingOne() throws {
        let bobs = "65a1b2c3d4e5f60718293a4b", missing = "65a1b2c3d4e5f60718293a4c"
        let bobKey = FerryValue.objectId(try ObjectId(hex: bobs))
        let stored = [ObjectKey(table: "Item", key: bobKey): StoredObject(object: StampedObject(schema: item, key: bobKey, fields: [
            FieldValue(name: "ownerId", value: .string("bob")), FieldValue(name: "itemName", value: .string("bob's")),
            FieldValue(name: "complexity", value: .int(1)),
        ], stamp: Stamp(timestamp: 1, fileIdent: 1), version: 1))]
        for write in [
            { (hex: String) throws -> [Instruction] in [.set(table: "Item", key: .objectId(try ObjectId(hex: hex)), field: "complexity", value: .int(3))] },
            { (hex: String) throws -> [Instruction] in [.erase(table: "Item", key: .objectId(try ObjectId(hex: hex)))] },
            { (hex: String) throws -> [Instruction] in [.addInteger(table: "Item", key: .objectId(try ObjectId(hex: hex)), field: "complexity", delta: 1),
                                                        .set(table: "Item", key: .objectId(try ObjectId(hex: hex)), field: "ownerId", value: .string("alice"))] },
        ] {
            let toBobs = try integration([upload(1, base: 1, try write(bobs))]).integrate(stored: stored, version: 2)
            let toMissing = try integration([upload(1, base: 1, try write(missing))]).integrate(stored: stored, version: 2)
            #expect(toBobs.compensating.isEmpty, "\(toBobs.compensating.map(\.reason))")
            #expect(toMissing.compensating.isEmpty)
            #expect(toBobs.toStore.isEmpty && toMissing.toStore.isEmpty)
            let a = try #require(toBobs.entries.values.first), b = try #require(toMissing.entries.values.first)
            #expect(a.changed == b.changed && a.rejected == b.rejected && a.exact == b.exact)
        }
        // A property the schema does not have is a protocol error for both.
        let bad = { (hex: String) throws -> UploadChangeset in self.upload(1, [.set(table: "Item", key: .objectId(try ObjectId(hex: hex)), field: "nosuch", value: .int(1))]) }
        #expect(throws: SessionFailure.self) { _ = try integration([try bad(bobs)]).integrate(stored: stored, version: 2) }
        #expect(throws: SessionFailure.self) { _ = try integration([try bad(missing)]).integrate(stored: stored, version: 2) }
        // A create of the taken key keeps its own reason (it must neither replace nor reveal it).
        let create = try integration([upload(1, [try self.create(bobs, owner: "alice", complexity: 2)])]).integrate(stored: stored, version: 2)
        #expect(create.compensating.count == 1 && create.toStore.isEmpty)
    }

    /// Issue 22, point 5: an upload's base is capped at what the session was sent.
    @Test func anUploadsBaseIsCappedAtWhatTheSessionWasSent() throws {
        let d = UploadIntegration.Decoded(upload(1, base: 1_000, [try create("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 2)]))
        #expect(d.cappingBase(at: 7).upload.lastIntegratedServerVersion == 7)
        #expect(d.cappingBase(at: 2_000).upload.lastIntegratedServerVersion == 1_000)
    }

    @Test func changesetsAlreadyAcknowledgedAreNotAppliedAgain() throws {
        let key = ObjectKey(table: "Item", key: .objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b")))
        let i = try integration(acknowledged: 3, [upload(3, [try create("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 2)])])
        #expect(i.keys.isEmpty)
        #expect(i.resend == [key])
        let outcome = try i.integrate(stored: [:], version: 9)
        #expect(outcome.toStore.isEmpty)
        #expect(outcome.lastClientVersion == 3)
    }

    @Test func aMalformedChangesetIsAProtocolError() throws {
        #expect(throws: SessionFailure.self) {
            _ = try integration([UploadChangeset(clientVersion: 1, lastIntegratedServerVersion: 0, changeset: [0xff, 0x01, 0x02])])
        }
    }

    @Test func aConcurrentStoredWriteDecidesByStampAndIsNotAnExactEcho() throws {
        let hex = "65a1b2c3d4e5f60718293a4b"
        let key = ObjectKey(table: "Item", key: .objectId(try ObjectId(hex: hex)))
        // The server has the object at version 4 (written by another device, later clock).
        let first = try integration([upload(1, [try create(hex, owner: "alice", complexity: 1)])])
        var stored = try #require(first.integrate(stored: [:], version: 4, now: 2_000_000_000_000).toStore[key])
        stored.object = stored.object.map { o in var o = o; o.stamps = o.stamps.map { _ in Stamp(timestamp: 5_000, fileIdent: 99) }; return o }
        // This client saw version 0 only: its set of complexity is concurrent and older.
        let set = Instruction.set(table: "Item", key: key.key, field: "complexity", value: .int(3))
        let outcome = try integration([upload(1, base: 0, [set])]).integrate(stored: [key: stored], version: 5)
        #expect(outcome.entries[key]?.exact == false)
    }
}

/// The sync log's summary of an upload keeps its first lines and counts the rest (issue 23:
/// formatting every object's key of a bulk upload cost 7% of its integration).
@Suite("Server: an upload's sync log summary")
struct UploadSummaryTests {
    static func key(_ n: Int) -> FerryValue {
        .objectId(try! ObjectId(bytes: [UInt8](repeating: 7, count: 8) + withUnsafeBytes(of: UInt32(n).bigEndian) { Array($0) }))
    }

    static func decoded(_ version: UInt64, _ instructions: [Instruction]) -> UploadIntegration.Decoded {
        UploadIntegration.Decoded(UploadChangeset(clientVersion: version, lastIntegratedServerVersion: 0,
                                                  changeset: ChangesetCodec.encode(Changeset(timestamp: 1_000, instructions: instructions))))
    }

    @Test func runsOnOneObjectAreOneLineAndLinesPastTheLimitAreOnlyCounted() {
        var first: [Instruction] = []
        for n in 0..<5 {
            first.append(.create(table: "Item", key: Self.key(n), fields: [FieldValue(name: "complexity", value: .int(1))]))
            first.append(.set(table: "Item", key: Self.key(n), field: "complexity", value: .int(2)))
            first.append(.set(table: "Item", key: Self.key(n), field: "ownerId", value: .string("a")))
        }
        let second = (5..<12).map { Instruction.erase(table: "Item", key: Self.key($0)) }
        let broken = UploadIntegration.Decoded(UploadChangeset(clientVersion: 3, lastIntegratedServerVersion: 0, changeset: [9, 9, 9]))
        let summary = SyncTelemetry.UploadSummary([Self.decoded(1, first), broken, Self.decoded(2, second)], maxLines: 8)
        // Objects 0..4: a create line and an update line (two sets) each; then erases.
        let expected: [SyncTelemetry.UploadSummary.Line] = (0..<5).flatMap { n in
            [.init(version: 1, table: "Item", operation: "create", key: Self.key(n), count: 1),
             .init(version: 1, table: "Item", operation: "update", key: Self.key(n), count: 2)]
        } + (5..<12).map { .init(version: 2, table: "Item", operation: "erase", key: Self.key($0), count: 1) }
        #expect(summary.lines == Array(expected.prefix(8)))
        #expect(summary.omitted == expected.count - 8)
        #expect(summary.instructions == first.count + second.count)
        #expect(summary.undecodable.map(\.version) == [3])
        let all = SyncTelemetry.UploadSummary([Self.decoded(1, first), Self.decoded(2, second)], maxLines: 100)
        #expect(all.lines == expected && all.omitted == 0)
    }
}
