@testable import FerryCore

/// The seeds' Item class plus a few more property kinds, shared by the core tests.
enum TestSchemas {
    static let item = try! ObjectSchema(name: "Item", properties: [
        Property(name: "_id", type: .objectId, isPrimaryKey: true),
        Property(name: "ownerId", type: .string, isIndexed: true),
        Property(name: "itemName", type: .string),
        Property(name: "complexity", type: .int, isIndexed: true),
        Property(name: "score", type: .double, isOptional: true),
        Property(name: "tags", type: .string, isList: true),
        Property(name: "done", type: .bool),
        Property(name: "due", type: .timestamp, isOptional: true),
    ])

    static func row(_ id: UInt8, owner: String, name: String, complexity: Int64, score: Double? = nil,
                    tags: [String] = [], done: Bool = false, due: Timestamp? = nil) -> [FerryValue] {
        [.objectId(try! ObjectId(bytes: [UInt8](repeating: id, count: 12))), .string(owner), .string(name), .int(complexity),
         score.map { .double($0) } ?? .null, .list(tags.map { .string($0) }), .bool(done), due.map { .timestamp($0) } ?? .null]
    }
}
