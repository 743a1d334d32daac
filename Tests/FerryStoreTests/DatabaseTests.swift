import Testing
import FerryCore
import FerrySQLite
@testable import FerryStore

@Suite("Database: transactions, objects, lists")
struct DatabaseTests {
    @Test func createReadUpdateDelete() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.beginWrite()
        try Fixtures.createItem(db, 1, complexity: 3)
        try db.set(classIndex: 0, key: Fixtures.oid(1), property: 5, value: .string("hello"))
        try db.addInteger(classIndex: 0, key: Fixtures.oid(1), property: 3, delta: 4)
        try db.commit()
        let row = try #require(try db.object(classIndex: 0, key: Fixtures.oid(1)))
        #expect(row[1] == .string("alice"))
        #expect(row[3] == .int(7))
        #expect(row[4] == .list([]))
        #expect(row[5] == .string("hello"))
        try db.beginWrite()
        try db.delete(classIndex: 0, key: Fixtures.oid(1))
        try db.commit()
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(1)) == nil)
        #expect(try db.historyCount() == 2)
        try db.verifyHistory()
    }

    @Test func transactionRules() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        #expect(throws: FerryError.self) { try Fixtures.createItem(db, 1) }
        #expect(throws: FerryError.self) { try db.commit() }
        #expect(throws: FerryError.self) { try db.cancel() }
        try db.beginWrite()
        do { try db.beginWrite(); Issue.record("nested begin must fail") } catch let e as FerryError { #expect(e.code == .alreadyInTransaction) }
        try Fixtures.createItem(db, 1)
        try db.cancel()
        #expect(try db.object(classIndex: 0, key: Fixtures.oid(1)) == nil)
        #expect(try db.historyCount() == 0)
    }

    @Test func otherHandlesSeeOnlyCommits() throws {
        let path = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(path) }
        let config = DatabaseConfiguration(location: .file(path + "/a.ferry"), schema: Fixtures.itemSchema())
        let a = try Database.open(config, scheduler: try PollingScheduler())
        let b = try Database.open(DatabaseConfiguration(location: .file(path + "/./a.ferry"), schema: nil), scheduler: try PollingScheduler())
        defer { a.close(); b.close() }
        try a.beginWrite()
        try Fixtures.createItem(a, 1)
        #expect(try a.object(classIndex: 0, key: Fixtures.oid(1)) != nil)  // own writes
        #expect(try b.object(classIndex: 0, key: Fixtures.oid(1)) == nil)  // not yet committed
        try a.commit()
        #expect(try b.object(classIndex: 0, key: Fixtures.oid(1)) != nil)
    }

    @Test func duplicateKeysAndBadValues() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.beginWrite()
        try Fixtures.createItem(db, 1)
        do { try Fixtures.createItem(db, 1); Issue.record("duplicate must fail") } catch let e as FerryError { #expect(e.code == .duplicatePrimaryKey) }
        do { try db.create(classIndex: 0, values: [(1, .string("x"))]); Issue.record("missing key") } catch let e as FerryError { #expect(e.code == .invalidArgument) }
        do { try db.create(classIndex: 0, values: [(0, Fixtures.oid(2)), (3, .string("x"))]); Issue.record("wrong type") } catch let e as FerryError { #expect(e.code == .wrongType) }
        do { try db.create(classIndex: 0, values: [(0, Fixtures.oid(2)), (1, .null)]); Issue.record("null required") } catch let e as FerryError { #expect(e.code == .wrongType) }
        do { try db.create(classIndex: 9, values: []); Issue.record("class") } catch let e as FerryError { #expect(e.code == .noSuchClass) }
        do { try db.create(classIndex: 0, values: [(0, Fixtures.oid(2)), (42, .int(1))]); Issue.record("property") } catch let e as FerryError { #expect(e.code == .noSuchProperty) }
        do { try db.set(classIndex: 0, key: Fixtures.oid(9), property: 1, value: .string("x")); Issue.record("missing object") } catch let e as FerryError { #expect(e.code == .notFound) }
        do { try db.set(classIndex: 0, key: .string("x"), property: 1, value: .string("x")); Issue.record("key type") } catch let e as FerryError { #expect(e.code == .wrongType) }
        try db.set(classIndex: 0, key: Fixtures.oid(1), property: 3, value: .int(Int64.max))
        do { try db.addInteger(classIndex: 0, key: Fixtures.oid(1), property: 3, delta: 1); Issue.record("overflow") } catch let e as FerryError { #expect(e.code == .outOfRange) }
        try db.commit()
    }

    @Test func upsertRecordsOnlyChanges() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.beginWrite()
        try db.upsert(classIndex: 0, values: [(0, Fixtures.oid(1)), (1, .string("a")), (3, .int(1))])
        try db.commit()
        try db.beginWrite()
        try db.upsert(classIndex: 0, values: [(0, Fixtures.oid(1)), (1, .string("a")), (3, .int(2))])
        try db.commit()
        let history = try db.history()
        #expect(history.count == 2)
        #expect(history[1].instructions == [.set(table: "Item", key: Fixtures.oid(1), field: "complexity", value: .int(2))])
        try db.beginWrite()
        try db.upsert(classIndex: 0, values: [(0, Fixtures.oid(1)), (1, .string("a"))])
        try db.commit()
        #expect(try db.historyCount() == 2) // nothing changed, nothing recorded
    }

    @Test func listOperations() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let key = Fixtures.oid(1)
        try db.beginWrite()
        try Fixtures.createItem(db, 1)
        try db.modifyList(classIndex: 0, key: key, property: 4, .insert(0, .string("b")))
        try db.modifyList(classIndex: 0, key: key, property: 4, .insert(0, .string("a")))
        try db.modifyList(classIndex: 0, key: key, property: 4, .insert(2, .string("c")))
        try db.modifyList(classIndex: 0, key: key, property: 4, .set(1, .string("B")))
        try db.modifyList(classIndex: 0, key: key, property: 4, .erase(0))
        do { try db.modifyList(classIndex: 0, key: key, property: 4, .erase(5)); Issue.record("range") } catch let e as FerryError { #expect(e.code == .outOfRange) }
        do { try db.modifyList(classIndex: 0, key: key, property: 4, .insert(0, .int(1))); Issue.record("type") } catch let e as FerryError { #expect(e.code == .wrongType) }
        do { try db.modifyList(classIndex: 0, key: key, property: 1, .clear); Issue.record("not a list") } catch let e as FerryError { #expect(e.code == .wrongType) }
        try db.commit()
        #expect(try db.object(classIndex: 0, key: key)?[4] == .list([.string("B"), .string("c")]))
        try db.beginWrite()
        try db.modifyList(classIndex: 0, key: key, property: 4, .clear)
        try db.commit()
        #expect(try db.object(classIndex: 0, key: key)?[4] == .list([]))
        try db.verifyHistory()
    }

    @Test func closedHandlesRefuseEverything() throws {
        let db = try Fixtures.memory()
        try db.beginWrite()
        try Fixtures.createItem(db, 1)
        db.close()
        db.close()
        for call in [{ try db.beginWrite() }, { try db.commit() }, { _ = try db.object(classIndex: 0, key: Fixtures.oid(1)) },
                     { _ = try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []) }] as [() throws -> Void] {
            do { try call(); Issue.record("closed handle accepted a call") } catch let e as FerryError { #expect(e.code == .closed) }
        }
    }

    @Test func inMemoryDatabasesAreSharedThenDropped() throws {
        let id = "shared-\(UInt64.random(in: 0...UInt64.max))"
        let config = DatabaseConfiguration(location: .memory(id), schema: Fixtures.itemSchema())
        let a = try Database.open(config, scheduler: try PollingScheduler())
        let b = try Database.open(config, scheduler: try PollingScheduler())
        try a.beginWrite()
        try Fixtures.createItem(a, 1)
        try a.commit()
        #expect(try b.object(classIndex: 0, key: Fixtures.oid(1)) != nil)
        a.close()
        b.close()
        let c = try Database.open(config, scheduler: try PollingScheduler())
        defer { c.close() }
        #expect(try c.object(classIndex: 0, key: Fixtures.oid(1)) == nil)
    }

    @Test func inMemoryReadsDoNotWaitForAnotherHandlesWrite() throws {
        let config = DatabaseConfiguration(location: .memory("readers-\(UInt64.random(in: 0...UInt64.max))"), schema: Fixtures.itemSchema())
        let a = try Database.open(config, scheduler: try PollingScheduler())
        let b = try Database.open(config, scheduler: try PollingScheduler())
        defer { a.close(); b.close() }
        try a.beginWrite()
        try Fixtures.createItem(a, 1)
        try a.commit()
        try a.beginWrite()
        try Fixtures.createItem(a, 2)
        #expect(try b.object(classIndex: 0, key: Fixtures.oid(1)) != nil)
        #expect(try b.object(classIndex: 0, key: Fixtures.oid(2)) == nil)
        #expect(try b.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count == 1)
        try a.commit()
        #expect(try b.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count == 2)
    }

    @Test func historyReplaysNaNAndDroppedProperties() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/n.ferry"
        let extra = [Property(name: "d", type: .double), Property(name: "gone", type: .string, isOptional: true)]
        let v1 = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema(extra: extra)), scheduler: try PollingScheduler())
        try v1.beginWrite()
        try v1.create(classIndex: 0, values: [(0, Fixtures.oid(1)), (6, .double(.nan)), (7, .string("kept"))])
        try v1.commit()
        try v1.verifyHistory()
        v1.close()
        let v2 = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema(extra: [extra[0]])), scheduler: try PollingScheduler())
        defer { v2.close() }
        try v2.verifyHistory()
    }

    @Test func historyCheckCatchesTampering() throws {
        let path = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(path) }
        let db = try Database.open(DatabaseConfiguration(location: .file(path + "/h.ferry"), schema: Fixtures.itemSchema()), scheduler: try PollingScheduler())
        try db.beginWrite()
        for n in 1...20 { try Fixtures.createItem(db, UInt32(n), complexity: Int64(n)) }
        try db.commit()
        try db.verifyHistory()
        db.close()
        let raw = try SQLiteConnection(path: "file:" + path + "/h.ferry", flags: 6, description: "raw")
        try raw.exec("UPDATE \"class_Item\" SET \"complexity\" = 99 WHERE \"complexity\" = 3")
        raw.close()
        let again = try Database.open(DatabaseConfiguration(location: .file(path + "/h.ferry"), schema: nil), scheduler: try PollingScheduler())
        defer { again.close() }
        do { try again.verifyHistory(); Issue.record("tampering not noticed") } catch let e as FerryError {
            #expect(e.code == .corrupt)
            #expect(e.message.contains("differs from its history"))
        }
    }
}
