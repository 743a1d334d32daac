import FerryCore
import FerryStore

/// The object scans of the SQLite sync store, on any connection to it: the store's own
/// (under its lock) and a snapshot's (`SQLiteSyncSnapshot`), so both read alike.
enum SQLiteObjectReads {
    static func forEachObject(_ db: SQLiteConnection, schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws {
        let s = try db.statement("SELECT pk, doc FROM objects WHERE tbl = ? AND doc IS NOT NULL")
        defer { s.reset() }
        s.bind(1, schema.name)
        while try s.step() {
            try body(try ValueCodec.decode(s.blob(0)), try StampedObject.decode(s.blob(1), schema: schema))
        }
    }

    static func changes(_ db: SQLiteConnection, since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws {
        let s = try db.statement("SELECT pk, doc, version, erased_doc FROM objects WHERE tbl = ? AND version > ? ORDER BY version")
        defer { s.reset() }
        s.bind(1, schema.name); s.bind(2, Int64(bitPattern: version))
        while try s.step() {
            let key = try ValueCodec.decode(s.blob(0))
            let object = s.isNull(1) ? nil : try StampedObject.decode(s.blob(1), schema: schema)
            let erased = s.isNull(3) ? nil : try StampedObject.decode(s.blob(3), schema: schema)
            try body(ChangedObject(key: key, object: object, erasedState: erased, version: UInt64(bitPattern: s.int64(2))))
        }
    }
}
