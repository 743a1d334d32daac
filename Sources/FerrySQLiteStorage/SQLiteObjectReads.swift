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

    /// Up to `limit` live objects of a class after the encoded key `after`, in key order (the
    /// primary key's order: a snapshot pages through a class with no gap or repeat).
    static func objectsPage(_ db: SQLiteConnection, schema: ObjectSchema, after: [UInt8]?, limit: Int) throws
        -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] {
        let s = try db.statement(after == nil
            ? "SELECT pk, doc FROM objects WHERE tbl = ?1 AND doc IS NOT NULL ORDER BY pk LIMIT ?3"
            : "SELECT pk, doc FROM objects WHERE tbl = ?1 AND doc IS NOT NULL AND pk > ?2 ORDER BY pk LIMIT ?3")
        defer { s.reset() }
        s.bind(1, schema.name)
        if let after { s.bind(2, blob: after) }
        s.bind(3, Int64(limit))
        var out: [(key: FerryValue, object: StampedObject, rawKey: [UInt8])] = []
        while try s.step() {
            let raw = s.blob(0)
            out.append((try ValueCodec.decode(raw), try StampedObject.decode(s.blob(1), schema: schema), raw))
        }
        return out
    }

    /// Up to `limit` changes of a class after `version`, in (version, key) order, after the
    /// position `after` (the index on (tbl, version) holds the key too: the table has no rowid).
    static func changesPage(_ db: SQLiteConnection, since version: UInt64, schema: ObjectSchema, after: (version: Int64, rawKey: [UInt8])?,
                            limit: Int) throws -> [(change: ChangedObject, rawKey: [UInt8])] {
        let s = try db.statement(after == nil
            ? "SELECT pk, doc, version, erased_doc, author FROM objects WHERE tbl = ?1 AND version > ?2 ORDER BY version, pk LIMIT ?5"
            : "SELECT pk, doc, version, erased_doc, author FROM objects WHERE tbl = ?1 AND version > ?2 AND (version, pk) > (?3, ?4) ORDER BY version, pk LIMIT ?5")
        defer { s.reset() }
        s.bind(1, schema.name); s.bind(2, Int64(bitPattern: version))
        if let after { s.bind(3, after.version); s.bind(4, blob: after.rawKey) }
        s.bind(5, Int64(limit))
        var out: [(change: ChangedObject, rawKey: [UInt8])] = []
        while try s.step() {
            let raw = s.blob(0)
            let object = s.isNull(1) ? nil : try StampedObject.decode(s.blob(1), schema: schema)
            let erased = s.isNull(3) ? nil : try StampedObject.decode(s.blob(3), schema: schema)
            out.append((ChangedObject(key: try ValueCodec.decode(raw), object: object, erasedState: erased, version: UInt64(bitPattern: s.int64(2)),
                                     author: s.isNull(4) ? nil : UInt64(bitPattern: s.int64(4))), raw))
        }
        return out
    }

    static func changes(_ db: SQLiteConnection, since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws {
        let s = try db.statement("SELECT pk, doc, version, erased_doc, author FROM objects WHERE tbl = ? AND version > ? ORDER BY version")
        defer { s.reset() }
        s.bind(1, schema.name); s.bind(2, Int64(bitPattern: version))
        while try s.step() {
            let key = try ValueCodec.decode(s.blob(0))
            let object = s.isNull(1) ? nil : try StampedObject.decode(s.blob(1), schema: schema)
            let erased = s.isNull(3) ? nil : try StampedObject.decode(s.blob(3), schema: schema)
            try body(ChangedObject(key: key, object: object, erasedState: erased, version: UInt64(bitPattern: s.int64(2)),
                                     author: s.isNull(4) ? nil : UInt64(bitPattern: s.int64(4))))
        }
    }
}
