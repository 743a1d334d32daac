import FerryCore
import FerrySQLite
import FerrySyncStorage

/// The object reads of the SQLite sync store, on any connection to it (the writer inside a
/// transaction, the reader, a snapshot's), so all read alike.
enum SQLiteObjectReads {
    static func object(_ db: SQLiteConnection, _ key: ObjectKey, schema: ObjectSchema) throws -> StoredObject? {
        let s = try db.statement("SELECT doc, lists, erased_doc FROM objects WHERE tbl = ? AND pk = ?")
        defer { s.reset() }
        s.bind(1, key.table); s.bind(2, blob: ValueCodec.encode(key.key))
        guard try s.step() else { return nil }
        let object = s.isNull(0) ? nil : try StampedObject.decode(s.blob(0), schema: schema)
        var lists = ListOperationLog()
        if !s.isNull(1) {
            var r = ByteReader(s.blob(1))
            lists = try ListOperationLog.decode(from: &r)
        }
        let erased = s.isNull(2) ? nil : try StampedObject.decode(s.blob(2), schema: schema)
        return StoredObject(object: object, lists: lists, erasedState: erased)
    }

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
