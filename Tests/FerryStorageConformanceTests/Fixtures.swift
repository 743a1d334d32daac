import FerryCore
import FerrySyncStorage

/// The classes and objects the conformance tests store: every kind of value a property can
/// hold, so a backend that re-encodes anything (instead of keeping the codec's bytes) shows.
enum Fixtures {
    static let item = try! ObjectSchema(name: "Item", properties: [
        Property(name: "_id", type: .objectId, isPrimaryKey: true),
        Property(name: "ownerId", type: .string, isIndexed: true),
        Property(name: "complexity", type: .int),
        Property(name: "score", type: .double, isOptional: true),
        Property(name: "done", type: .bool),
        Property(name: "due", type: .timestamp, isOptional: true),
        Property(name: "blob", type: .binary),
        Property(name: "ref", type: .uuid, isOptional: true),
        Property(name: "tags", type: .string, isList: true),
    ])
    /// A second class with another primary-key type: changes of one class never show in another's.
    static let note = try! ObjectSchema(name: "Note", properties: [
        Property(name: "_id", type: .string, isPrimaryKey: true),
        Property(name: "text", type: .string),
    ])
    static let schema = try! Schema([item, note])

    static func itemKey(_ n: UInt8) -> ObjectKey {
        ObjectKey(table: item.name, key: .objectId(try! ObjectId(bytes: [UInt8](repeating: n, count: 12))))
    }

    static func noteKey(_ id: String) -> ObjectKey { ObjectKey(table: note.name, key: .string(id)) }

    /// An Item with a value of every kind, each property stamped differently (the stamps and
    /// per-property versions are the merge state a backend must keep exactly).
    static func item(_ n: UInt8, complexity: Int64 = 3, version: UInt64 = 1, tags: [String] = ["a", "b"]) -> StampedObject {
        let values: [FerryValue] = [
            itemKey(n).key, .string("owner-\(n)"), .int(complexity), .double(-2.5e-300), .bool(true),
            .timestamp(try! Timestamp(seconds: -62_135_596_800, nanoseconds: 999_999_999)),
            .binary([0, 0xFF, 0x80, 0x7F, 0]), .uuid(try! FerryUUID(string: "3b241101-e2bb-4255-8caf-4136c566a962")),
            .list(tags.map { .string($0) }),
        ]
        let stamps = values.indices.map { Stamp(timestamp: Int64.min + Int64($0) * 1_000_000_007, fileIdent: UInt64.max - UInt64($0)) }
        let versions = values.indices.map { UInt64($0) * 3 + version }
        return StampedObject(values: values, stamps: stamps, versions: versions)
    }

    static func note(_ id: String, _ text: String, version: UInt64 = 1) -> StampedObject {
        StampedObject(values: [.string(id), .string(text)], stamps: [Stamp(timestamp: 7, fileIdent: 1), Stamp(timestamp: 8, fileIdent: 2)],
                      versions: [version, version])
    }

    /// A list-operation log with one of each operation, on the tags property.
    static func tagLog(version: UInt64 = 1) -> ListOperationLog {
        var log = ListOperationLog()
        log.record(.insert(0), property: 8, version: version, origin: 5)
        log.record(.insert(1), property: 8, version: version, origin: 5)
        log.record(.set(1), property: 8, version: version + 1, origin: 6)
        log.record(.erase(0), property: 8, version: version + 2, origin: 7)
        log.record(.clear, property: 8, version: UInt64.max >> 1, origin: UInt64.max)
        return log
    }

    static let subscriptions = [
        Subscription(name: "mine", objectType: "Item", query: "ownerId == \"u1\" AND complexity <= 4"),
        Subscription(name: "", objectType: "Note", query: "TRUEPREDICATE"),
    ]
}
