/// The binary form of a changeset, as the history stores it and sync will send it:
///
///     version:u8(=1) timestamp:zigzag  names:count (string)*  instructions:count (instruction)*
///     instruction := tag:u8 table:nameIndex key:value payload
///                  | createRun:u8 table:nameIndex fields:count (nameIndex)* rows:u32le
///                    (row := (shared:varint rest:bytes) for the key and each field)
///
/// Class and property names are interned in the name table, so a transaction of 10,000
/// creates spells "Item" once; a create run front-codes each value against the previous
/// object's (see `ChangesetWriter`). `instructions` counts objects, a run's too.
public enum ChangesetCodec {
    public static let version: UInt8 = 1

    public enum Tag: UInt8 { case create = 1, erase, set, addInteger, listInsert, listSet, listErase, listClear, createRun }

    public static func encode(_ changeset: Changeset) -> [UInt8] {
        var w = ChangesetWriter(capacity: changeset.instructions.count * 48)
        for instruction in changeset.instructions { w.append(instruction) }
        return w.finish(timestamp: changeset.timestamp)
    }

    public static func decode(_ bytes: [UInt8]) throws -> Changeset {
        var r = ByteReader(bytes)
        let v = try r.byte()
        guard v == version else { throw r.corrupt("unknown changeset version \(v)") }
        let timestamp = try r.signed()
        let nameCount = try r.count()
        var names: [String] = []
        names.reserveCapacity(nameCount)
        for _ in 0..<nameCount { names.append(try r.string()) }
        func name() throws -> String {
            let i = try r.varint()
            guard i < UInt64(names.count) else { throw r.corrupt("name index \(i) out of range") }
            return names[Int(i)]
        }
        func index() throws -> Int {
            let i = try r.varint()
            guard i <= UInt64(Int32.max) else { throw r.corrupt("list index \(i) out of range") }
            return Int(i)
        }
        let count = try r.count(minSize: 2)
        var instructions: [Instruction] = []
        instructions.reserveCapacity(count)
        // Front-coded values may not expand past this (a hostile run could otherwise repeat a
        // large value for millions of two-byte rows).
        var expansionBudget = max(bytes.count * 64, 1 << 20)
        while instructions.count < count {
            let rawTag = try r.byte()
            guard let tag = Tag(rawValue: rawTag) else { throw r.corrupt("unknown instruction tag \(rawTag)") }
            let table = try name()
            if tag == .createRun {
                let fieldCount = try r.count()
                guard fieldCount < 4096 else { throw r.corrupt("create run with \(fieldCount) fields") }
                var fieldNames: [String] = []
                for _ in 0..<fieldCount { fieldNames.append(try name()) }
                let rows = Int(try r.uint32())
                guard rows >= 1, rows <= count - instructions.count, rows <= r.remaining / (2 * (fieldCount + 1)) else {
                    throw r.corrupt("create run of \(rows) objects does not fit")
                }
                // Each column's previous value, rebuilt in place: the shared prefix stays, the
                // rest is replaced (no array made per value).
                var previous = [[UInt8]](repeating: [], count: fieldCount + 1)
                func next(_ column: Int) throws -> FerryValue {
                    let shared = try r.varint()
                    guard shared <= UInt64(previous[column].count) else { throw r.corrupt("front-coded prefix longer than the previous value") }
                    let rest = try r.lengthPrefixed()
                    expansionBudget -= Int(shared) + rest.count
                    guard expansionBudget >= 0 else { throw r.corrupt("create run expands beyond its limit") }
                    previous[column].removeSubrange(Int(shared)...)
                    previous[column].append(contentsOf: rest)
                    do { return try ValueCodec.decode(previous[column]) } catch let e as FerryError {
                        throw FerryError(.corrupt, "a value in a create run: \(e.message)")
                    }
                }
                for _ in 0..<rows {
                    let key = try next(0)
                    guard key.type?.canBePrimaryKey == true else { throw r.corrupt("an object key must be an objectId, string, int or uuid") }
                    var fields: [FieldValue] = []
                    fields.reserveCapacity(fieldCount)
                    for (i, f) in fieldNames.enumerated() { fields.append(FieldValue(name: f, value: try next(i + 1))) }
                    instructions.append(.create(table: table, key: key, fields: fields))
                }
                continue
            }
            let key = try ValueCodec.decode(from: &r, allowList: false)
            guard key.type?.canBePrimaryKey == true else { throw r.corrupt("an object key must be an objectId, string, int or uuid") }
            switch tag {
            case .createRun:
                throw r.corrupt("unreachable create run")
            case .create:
                let n = try r.count(minSize: 2)
                var fields: [FieldValue] = []
                fields.reserveCapacity(n)
                for _ in 0..<n { fields.append(FieldValue(name: try name(), value: try ValueCodec.decode(from: &r))) }
                instructions.append(.create(table: table, key: key, fields: fields))
            case .erase: instructions.append(.erase(table: table, key: key))
            case .set: instructions.append(.set(table: table, key: key, field: try name(), value: try ValueCodec.decode(from: &r)))
            case .addInteger: instructions.append(.addInteger(table: table, key: key, field: try name(), delta: try r.signed()))
            case .listInsert:
                let f = try name(); let i = try index()
                instructions.append(.listInsert(table: table, key: key, field: f, index: i, value: try ValueCodec.decode(from: &r, allowList: false)))
            case .listSet:
                let f = try name(); let i = try index()
                instructions.append(.listSet(table: table, key: key, field: f, index: i, value: try ValueCodec.decode(from: &r, allowList: false)))
            case .listErase:
                let f = try name()
                instructions.append(.listErase(table: table, key: key, field: f, index: try index()))
            case .listClear: instructions.append(.listClear(table: table, key: key, field: try name()))
            }
        }
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after the changeset") }
        return Changeset(timestamp: timestamp, instructions: instructions)
    }
}
