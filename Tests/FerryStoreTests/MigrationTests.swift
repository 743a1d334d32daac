import Testing
#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import FerrySQLite
@testable import FerryStore

@Suite("Schema migration on reopen")
struct MigrationTests {
    func open(_ path: String, _ schema: Schema?) throws -> Database {
        try Database.open(DatabaseConfiguration(location: .file(path), schema: schema), scheduler: try PollingScheduler())
    }

    @Test func additiveChangesMigrate() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/m.ferry"
        let v1 = try open(path, Fixtures.itemSchema(indexComplexity: false))
        try v1.beginWrite()
        try Fixtures.createItem(v1, 1, complexity: 5)
        try v1.commit()
        v1.close()

        let extra = [Property(name: "priority", type: .int), Property(name: "due", type: .timestamp, isOptional: true)]
        let person = try ObjectSchema(name: "Person", properties: [Property(name: "_id", type: .string, isPrimaryKey: true)])
        let v2schema = try Schema(Fixtures.itemSchema(extra: extra).classes + [person])
        let v2 = try open(path, v2schema)
        let row = try #require(try v2.object(classIndex: 0, key: Fixtures.oid(1)))
        #expect(row[3] == .int(5))
        #expect(row[6] == .int(0))   // new required property: zero value
        #expect(row[7] == .null)     // new optional property: null
        try v2.beginWrite()
        try v2.create(classIndex: 1, values: [(0, .string("p1"))])
        try v2.commit()
        v2.close()

        // Dropping an optional property keeps its data for a later schema that names it again.
        var withoutNote = Fixtures.itemSchema(extra: extra).classes[0].properties
        withoutNote.removeAll { $0.name == "note" }
        let v3 = try open(path, try Schema([try ObjectSchema(name: "Item", properties: withoutNote)]))
        #expect(v3.schema.classes[0].propertyIndex(named: "note") == nil)
        v3.close()
        let dynamic = try open(path, nil)
        defer { dynamic.close() }
        #expect(dynamic.schema.classIndex(named: "Person") != nil)
        #expect(dynamic.schema.classes[0].propertyIndex(named: "note") != nil)
        #expect(dynamic.schema.classes[0].propertyIndex(named: "priority") != nil)
    }

    @Test(arguments: ["type", "optional", "key", "dropRequired"])
    func breakingChangesAreRefusedAndLeaveTheFileAlone(change: String) throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/b.ferry"
        let v1 = try open(path, Fixtures.itemSchema())
        try v1.beginWrite()
        try Fixtures.createItem(v1, 1, complexity: 5)
        try v1.commit()
        v1.close()

        var props = Fixtures.itemSchema().classes[0].properties
        switch change {
        case "type": props[3] = Property(name: "complexity", type: .double)
        case "optional": props[1] = Property(name: "ownerId", type: .string, isOptional: true)
        case "key": props[0] = Property(name: "_id", type: .string, isPrimaryKey: true)
        default: props.remove(at: 2)
        }
        do {
            _ = try open(path, try Schema([try ObjectSchema(name: "Item", properties: props)]))
            Issue.record("a breaking change (\(change)) was accepted")
        } catch let e as FerryError {
            #expect(e.code == .schemaMismatch)
        }
        let again = try open(path, Fixtures.itemSchema())
        defer { again.close() }
        #expect(try again.object(classIndex: 0, key: Fixtures.oid(1))?[3] == .int(5))
    }

    @Test func aSecondHandleMustAgreeOnTheSchema() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let a = try open(dir + "/s.ferry", Fixtures.itemSchema())
        defer { a.close() }
        do { _ = try open(dir + "/s.ferry", Fixtures.itemSchema(indexComplexity: false)); Issue.record("accepted") }
        catch let e as FerryError { #expect(e.code == .schemaMismatch) }
        let b = try open(dir + "/s.ferry", nil)
        b.close()
    }

    @Test func newDatabasesNeedASchemaAndForeignFilesAreRefused() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        do { _ = try open(dir + "/new.ferry", nil); Issue.record("accepted") } catch let e as FerryError { #expect(e.code == .invalidSchema) }
        let raw = try SQLiteConnection(path: "file:" + dir + "/foreign.db", flags: 6, description: "raw")
        try raw.exec("CREATE TABLE t (x)")
        raw.close()
        do { _ = try open(dir + "/foreign.db", Fixtures.itemSchema()); Issue.record("accepted") } catch let e as FerryError { #expect(e.code == .corrupt) }
    }
}

@Suite("File names")
struct FileNameTests {
    @Test(arguments: ["données.ferry", "with space.ferry", "percent%41.ferry", "q?.ferry", "h#ash.ferry", "日本.ferry"])
    func unusualNamesAreUsedAsGiven(name: String) throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let db = try Database.open(DatabaseConfiguration(location: .file(dir + "/" + name), schema: Fixtures.itemSchema()),
                                   scheduler: try PollingScheduler())
        db.close()
        #expect(access(dir + "/" + name, F_OK) == 0)
    }
}
