import FerryCore
import FerrySQLite
import FerryStore
import Foundation
import Testing

/// The sync engine's integration of downloads treats the server's values as untrusted.
@Suite("Sync integration")
struct SyncIntegrationTests {
    @Test func aDownloadedValueOfTheWrongTypeIsRefusedNotStored() throws {
        let os = try ObjectSchema(name: "Item", properties: [
            Property(name: "_id", type: .string, isPrimaryKey: true),
            Property(name: "complexity", type: .int),
            Property(name: "tags", type: .string, isList: true),
        ])
        let path = NSTemporaryDirectory() + "ferry-integrate-\(UInt64.random(in: 0...UInt64.max)).ferry"
        let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: try Schema([os])), scheduler: PollingScheduler())
        defer { db.close() }
        let bad: [Instruction] = [.create(table: "Item", key: .string("a"), fields: [FieldValue(name: "complexity", value: .string("seven"))])]
        #expect(throws: FerryError.self) { try db.integrate(bad, serverVersion: 1, completesVersion: true, acknowledged: 0) }
        let badList: [Instruction] = [.create(table: "Item", key: .string("b"), fields: [FieldValue(name: "tags", value: .list([.int(1)]))])]
        #expect(throws: FerryError.self) { try db.integrate(badList, serverVersion: 1, completesVersion: true, acknowledged: 0) }
        let badKey: [Instruction] = [.create(table: "Item", key: .int(3), fields: [])]
        #expect(throws: FerryError.self) { try db.integrate(badKey, serverVersion: 1, completesVersion: true, acknowledged: 0) }
        #expect(try db.object(classIndex: 0, key: .string("a")) == nil)
        let good: [Instruction] = [.create(table: "Item", key: .string("c"), fields: [FieldValue(name: "complexity", value: .int(2)),
                                                                                       FieldValue(name: "tags", value: .list([.string("x")]))])]
        try db.integrate(good, serverVersion: 2, completesVersion: true, acknowledged: 0)
        #expect(try db.object(classIndex: 0, key: .string("c")) == [.string("c"), .int(2), .list([.string("x")])])
        #expect(try db.syncMetadata().serverVersion == 2)
    }

    /// Issue 22, point 10: a file whose history holds a changeset that does not decode is
    /// damaged. The download that lays the device's pending writes over the server's state
    /// fails with `corrupt`; it used to take the changeset as empty and drop those writes.
    @Test func aDamagedPendingChangesetFailsTheDownloadInsteadOfDroppingTheWrites() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/damaged.ferry"
        let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        try db.beginWrite()
        try Fixtures.createItem(db, 1, complexity: 1)
        try db.commit()
        db.close()
        try Self.damageLastChangeset(path)
        let again = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        defer { again.close() }
        let download: [Instruction] = [.set(table: "Item", key: Fixtures.oid(1), field: "complexity", value: .int(5))]
        do {
            try again.integrate(download, serverVersion: 1, completesVersion: true, acknowledged: 0)
            Issue.record("the damaged changeset was taken as empty")
        } catch let e as FerryError {
            #expect(e.code == .corrupt, "\(e)")
        }
    }

    /// Issue 22, point 10: the next write's timestamp follows the last changeset's; when that
    /// does not decode, the write fails with `corrupt` (it used to count from 0, ordering the
    /// write before every earlier one of the device).
    @Test func aDamagedLastChangesetFailsTheNextWriteInsteadOfRestartingTheClock() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/clock.ferry"
        let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        try db.beginWrite()
        try Fixtures.createItem(db, 1)
        try db.commit()
        db.close()
        try Self.damageLastChangeset(path)
        let again = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        defer { again.close() }
        do {
            try again.beginWrite()
            try Fixtures.createItem(again, 2)
            try again.commit()
            Issue.record("a write after a damaged changeset got a timestamp from 0")
        } catch let e as FerryError {
            #expect(e.code == .corrupt, "\(e)")
            try? again.cancel()
        }
    }

    /// Issue 22, point 10: a server instruction that fails to apply for a reason other than
    /// not fitting this device's data (here SQLite fails the update, as a full disk or an I/O
    /// error would) fails the download, and nothing of it is kept; it used to be dropped and the
    /// server version recorded as integrated, so the change never came back.
    @Test func anInstructionThatFailsToApplyFailsTheDownload() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/failing.ferry"
        let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: PollingScheduler())
        defer { db.close() }
        try db.integrate([.create(table: "Item", key: Fixtures.oid(2), fields: [FieldValue(name: "complexity", value: .int(2))])],
                         serverVersion: 1, completesVersion: true, acknowledged: 0)
        // Every update of the class's table now fails inside SQLite, when it runs (an integer
        // overflow in a trigger).
        let raw = try SQLiteConnection(path: "file:" + path, flags: 6, description: "raw")
        let table = try #require(try Self.tableName(raw))
        try raw.exec("CREATE TRIGGER fail_on_update BEFORE UPDATE ON \"\(table)\" BEGIN SELECT abs(-9223372036854775808); END")
        raw.close()
        let download: [Instruction] = [.set(table: "Item", key: Fixtures.oid(2), field: "complexity", value: .int(7))]
        #expect(throws: FerryError.self) { try db.integrate(download, serverVersion: 2, completesVersion: true, acknowledged: 0) }
        #expect(try db.syncMetadata().serverVersion == 1)
    }

    static func tableName(_ raw: SQLiteConnection) throws -> String? {
        let s = try raw.statement("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%Item%'")
        defer { s.resetKeepingBindings() }
        return try s.step() ? s.string(0) : nil
    }

    static func damageLastChangeset(_ path: String) throws {
        let raw = try SQLiteConnection(path: "file:" + path, flags: 6, description: "raw")
        try raw.exec("UPDATE __ferry_history SET changeset = x'ff00' WHERE version = (SELECT MAX(version) FROM __ferry_history)")
        raw.close()
    }
}
