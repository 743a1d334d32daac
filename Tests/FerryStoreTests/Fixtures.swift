import FerryCore
@testable import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// Schemas, temporary directories and handles for the store tests.
enum Fixtures {
    static func itemSchema(indexComplexity: Bool = true, extra: [Property] = []) -> Schema {
        try! Schema([try! ObjectSchema(name: "Item", properties: [
            Property(name: "_id", type: .objectId, isPrimaryKey: true),
            Property(name: "ownerId", type: .string),
            Property(name: "itemName", type: .string),
            Property(name: "complexity", type: .int, isIndexed: indexComplexity),
            Property(name: "tags", type: .string, isList: true),
            Property(name: "note", type: .string, isOptional: true),
        ] + extra)])
    }

    /// A fresh directory under /tmp, removed by the caller with `removeTree`.
    static func temporaryDirectory() -> String {
        var template = Array("/tmp/ferry-store-test-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    static func removeTree(_ path: String) {
        _ = system("rm -rf '\(path)'")
    }

    static func memory(_ schema: Schema = itemSchema(), scheduler: NotificationScheduler? = nil) throws -> Database {
        try Database.open(DatabaseConfiguration(location: .memory("test-\(UInt64.random(in: 0...UInt64.max))"), schema: schema),
                          scheduler: scheduler ?? (try PollingScheduler()))
    }

    static func oid(_ n: UInt32) -> FerryValue {
        .objectId(try! ObjectId(bytes: [0, 0, 0, 0, 0, 0, 0, 0, UInt8(n >> 24), UInt8(n >> 16 & 255), UInt8(n >> 8 & 255), UInt8(n & 255)]))
    }

    /// Creates an item with the given fields (indices in `itemSchema`).
    static func createItem(_ db: Database, _ n: UInt32, owner: String = "alice", complexity: Int64 = 1) throws {
        try db.create(classIndex: 0, values: [(0, oid(n)), (1, .string(owner)), (2, .string("item-\(n)")), (3, .int(complexity))])
    }
}
