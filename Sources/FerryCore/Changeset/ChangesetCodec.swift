/// The binary form of a changeset, as the history stores it and sync will send it:
///
///     version:u8(=1) timestamp:zigzag  names:count (string)*  instructions:count (instruction)*
///     instruction := tag:u8 table:nameIndex key:value payload
///
/// Class and property names are interned in the name table, so a transaction of 10,000
/// creates spells "Item" once.
public enum ChangesetCodec {
    public static let version: UInt8 = 1

    public enum Tag: UInt8 { case create = 1, erase, set, addInteger, listInsert, listSet, listErase, listClear }

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
        let count = try r.count(minSize: 3)
        var instructions: [Instruction] = []
        instructions.reserveCapacity(count)
        for _ in 0..<count {
            let rawTag = try r.byte()
            guard let tag = Tag(rawValue: rawTag) else { throw r.corrupt("unknown instruction tag \(rawTag)") }
            let table = try name()
            let key = try ValueCodec.decode(from: &r, allowList: false)
            guard key.type?.canBePrimaryKey == true else { throw r.corrupt("an object key must be an objectId, string, int or uuid") }
            switch tag {
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
