#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

/// The stored form of a `CommittedChanges` in the change log other processes read (SPEC
/// F-MULTIPROC): per class its name and objects, per object its primary key (`ValueCodec`),
/// a flags byte (1 created, 2 erased) and the names of the properties set. Read back as
/// hostile input (another process, or a damaged file, wrote it): malformed bytes are an
/// error, never a trap.
enum ChangeLogCodec {
    static func encode(_ changes: CommittedChanges) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.varint(UInt64(changes.byClass.count))
        for (table, objects) in changes.byClass {
            w.string(table)
            w.varint(UInt64(objects.count))
            for (key, t) in objects {
                ValueCodec.encode(key, into: &w)
                w.byte((t.created ? 1 : 0) | (t.erased ? 2 : 0))
                w.varint(UInt64(t.properties.count))
                for p in t.properties { w.string(p) }
            }
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> CommittedChanges {
        var r = ByteReader(bytes)
        var changes = CommittedChanges([])
        for _ in 0..<(try r.count(minSize: 2)) {
            let table = try r.string()
            for _ in 0..<(try r.count(minSize: 3)) {
                let key = try ValueCodec.decode(from: &r, allowList: false)
                switch key {
                case .int, .string, .objectId, .uuid: break
                default: throw FerryError(.corrupt, "a change-log entry names an object by a value no primary key can have")
                }
                let flags = try r.byte()
                var properties: [String] = []
                for _ in 0..<(try r.count(minSize: 1)) { properties.append(try r.string()) }
                changes.recordLogged(table: table, key: key, created: flags & 1 != 0, erased: flags & 2 != 0, properties: properties)
            }
        }
        guard r.isAtEnd else { throw FerryError(.corrupt, "trailing bytes after a change-log entry") }
        return changes
    }
}
