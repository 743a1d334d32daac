import FerryCore
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
}
