import FerryCore
@testable import FerryStore
import Testing

/// The store's half of a client reset: the file becomes the server's fresh state in one
/// transaction, and the unsynced changes are recovered by the rules of SPEC F-RECOVERY (one
/// test per rule) or discarded, with a report entry per touched object.
@Suite("Client reset in the store")
struct ClientResetTests {
    /// Item fields by index in `Fixtures.itemSchema`.
    static let owner = 1, name = 2, complexity = 3, tags = 4, note = 5
    static let target = Database.ResetTarget(clientFileIdent: 77, clientFileSalt: 5, serverVersion: 40)

    /// A file that synced items 1...3 (acknowledged and integrated at server version 10).
    func syncedFile() throws -> Database {
        let db = try Fixtures.memory()
        try db.integrate((1...3).map { server($0) }, serverVersion: 10, completesVersion: true, acknowledged: 0)
        try db.setClientFile(ident: 12, salt: 9)
        return db
    }

    func server(_ n: UInt32, complexity: Int64 = 1, tags: [String] = [], note: String? = nil) -> Instruction {
        .create(table: "Item", key: Fixtures.oid(n), fields: [
            FieldValue(name: "ownerId", value: .string("alice")), FieldValue(name: "itemName", value: .string("item-\(n)")),
            FieldValue(name: "complexity", value: .int(complexity)), FieldValue(name: "tags", value: .list(tags.map { .string($0) })),
            FieldValue(name: "note", value: note.map { .string($0) } ?? .null),
        ])
    }

    func write(_ db: Database, _ body: () throws -> Void) throws {
        try db.beginWrite()
        try body()
        try db.commit()
    }

    func item(_ db: Database, _ n: UInt32) throws -> [FerryValue]? { try db.object(classIndex: 0, key: Fixtures.oid(n)) }

    func entry(_ r: ClientResetReport, _ n: UInt32) -> ClientResetReport.Entry? { r.entries.first { $0.primaryKey == Fixtures.oid(n) } }

    @Test func objectsCreatedOnTheDeviceAndNotSyncedAreKeptAndQueuedForUpload() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) { try Fixtures.createItem(db, 8, complexity: 4) }
        let report = try db.resetToServerState((1...3).map { server($0) }, target: Self.target, recover: true, discardReason: "")
        #expect(try item(db, 8)?[Self.complexity] == .int(4))
        #expect(entry(report, 8) == .init(objectType: "Item", primaryKey: Fixtures.oid(8), outcome: .recovered,
                                           reason: "created on this device and not yet synced"))
        #expect(report.unsyncedChangesets == 1 && report.recovered)
        let meta = try db.syncMetadata()
        #expect(meta == SyncMetadata(clientFileIdent: 77, clientFileSalt: 5, serverVersion: 40, acknowledged: meta.acknowledged, answered: meta.acknowledged))
        let pending = try db.pendingChangesets(after: meta.acknowledged)
        #expect(pending.count == 1)
        #expect(pending.first?.base == 40)
        let uploaded = try ChangesetCodec.decode(pending[0].bytes).instructions
        #expect(uploaded.count == 1 && uploaded.first?.key == Fixtures.oid(8))
    }

    @Test func anObjectDeletedOnTheServerButUpdatedOnTheDeviceStaysDeleted() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) { try db.set(classIndex: 0, key: Fixtures.oid(2), property: Self.complexity, value: .int(9)) }
        let report = try db.resetToServerState([server(1), server(3)], target: Self.target, recover: true, discardReason: "")
        #expect(try item(db, 2) == nil)
        #expect(entry(report, 2)?.outcome == .discarded)
        #expect(entry(report, 2)?.reason == "deleted on the server: the device's updates to it are discarded")
        #expect(try db.pendingChangesets(after: try db.syncMetadata().acknowledged).isEmpty)
    }

    @Test func anObjectDeletedOnTheDeviceButNotOnTheServerIsDeleted() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) { try db.delete(classIndex: 0, key: Fixtures.oid(3)) }
        let report = try db.resetToServerState((1...3).map { server($0) }, target: Self.target, recover: true, discardReason: "")
        #expect(try item(db, 3) == nil)
        #expect(entry(report, 3)?.outcome == .recovered)
        let pending = try db.pendingChangesets(after: try db.syncMetadata().acknowledged)
        #expect(try pending.flatMap { try ChangesetCodec.decode($0.bytes).instructions } == [.erase(table: "Item", key: Fixtures.oid(3))])
    }

    @Test func forConflictingUpdatesOfOneFieldTheDevicesUpdateWins() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) {
            try db.set(classIndex: 0, key: Fixtures.oid(1), property: Self.complexity, value: .int(5))
            try db.addInteger(classIndex: 0, key: Fixtures.oid(2), property: Self.complexity, delta: 3)
        }
        // The server changed the same fields meanwhile, and another one the device left alone.
        let report = try db.resetToServerState([server(1, complexity: 2, note: "server"), server(2, complexity: 10), server(3)],
                                               target: Self.target, recover: true, discardReason: "")
        #expect(try item(db, 1)?[Self.complexity] == .int(5))
        #expect(try item(db, 1)?[Self.note] == .string("server"))
        // An add is replayed on the server's value: adds commute.
        #expect(try item(db, 2)?[Self.complexity] == .int(13))
        #expect(entry(report, 1)?.reason == "the device's updates applied over the server's: complexity")
    }

    @Test func aListTheDeviceChangedBecomesTheDevicesFinalList() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.integrate([server(1, tags: ["a", "b", "c"])], serverVersion: 10, completesVersion: true, acknowledged: 0)
        try write(db) {
            try db.modifyList(classIndex: 0, key: Fixtures.oid(1), property: Self.tags, .erase(0))
            try db.modifyList(classIndex: 0, key: Fixtures.oid(1), property: Self.tags, .insert(2, .string("d")))
        }
        // The server's list moved on too; the device's final list wins.
        try db.resetToServerState([server(1, tags: ["a", "x", "b", "c"])], target: Self.target, recover: true, discardReason: "")
        #expect(try item(db, 1)?[Self.tags] == .list([.string("b"), .string("c"), .string("d")]))
    }

    @Test func discardingDropsEveryUnsyncedChangeAndSaysWhy() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) {
            try Fixtures.createItem(db, 8)
            try db.set(classIndex: 0, key: Fixtures.oid(1), property: Self.complexity, value: .int(5))
            try db.delete(classIndex: 0, key: Fixtures.oid(2))
        }
        let report = try db.resetToServerState([server(1), server(2), server(4)], target: Self.target, recover: false,
                                               discardReason: "the mode is discardUnsyncedChanges")
        #expect(try item(db, 8) == nil)
        #expect(try item(db, 1)?[Self.complexity] == .int(1))
        #expect(try item(db, 2) != nil)
        #expect(try item(db, 3) == nil) // gone from the server
        #expect(try item(db, 4) != nil) // new on the server
        #expect(report.entries.map(\.primaryKey) == [Fixtures.oid(8), Fixtures.oid(1), Fixtures.oid(2)])
        #expect(report.entries.allSatisfy { $0.outcome == .discarded && $0.reason == "the mode is discardUnsyncedChanges" })
        #expect(!report.recovered)
        #expect(try db.pendingChangesets(after: try db.syncMetadata().acknowledged).isEmpty)
    }

    @Test func aServerObjectThatDoesNotFitTheSchemaChangesNothing() throws {
        let db = try syncedFile()
        defer { db.close() }
        try write(db) { try Fixtures.createItem(db, 8) }
        let bad: Instruction = .create(table: "Item", key: Fixtures.oid(1), fields: [FieldValue(name: "complexity", value: .string("high"))])
        #expect { try db.resetToServerState([bad], target: Self.target, recover: true, discardReason: "") } throws: { error in
            (error as? FerryError)?.code == .schemaMismatch
        }
        #expect(try item(db, 8) != nil)
        #expect(try item(db, 2) != nil)
        #expect(try db.syncMetadata().clientFileIdent == 12)
    }

    @Test func observersSeeWhatTheResetChanged() throws {
        let scheduler = try PollingScheduler()
        let db = try Fixtures.memory(scheduler: scheduler)
        defer { db.close() }
        try db.integrate((1...3).map { server($0) }, serverVersion: 10, completesVersion: true, acknowledged: 0)
        let seen = Collector()
        let token = try db.observeQuery(classIndex: 0, query: "TRUEPREDICATE", arguments: [], callback: seen.add)
        defer { token.cancel() }
        _ = scheduler.deliver()
        try db.resetToServerState([server(1), server(3, complexity: 7)], target: Self.target, recover: true, discardReason: "")
        _ = scheduler.deliver()
        #expect(seen.all.last?.deleted == [Fixtures.oid(2)])
        #expect(seen.all.last?.modified == [Fixtures.oid(3)])
    }
}
