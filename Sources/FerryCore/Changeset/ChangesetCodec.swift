/// The binary form of a changeset, as the history stores it and sync will send it:
///
///     version:u8(=1) timestamp:zigzag  names:count (string)*  instructions:count (instruction)*
///     instruction := tag:u8 table:nameIndex key:value payload
///
/// Class and property names are interned in the name table, so a transaction of 10,000
/// creates spells "Item" once.
public enum ChangesetCodec {
    static let version: UInt8 = 1

    enum Tag: UInt8 { case create = 1, erase, set, addInteger, listInsert, listSet, listErase, listClear }

    public static func encode(_ changeset: Changeset) -> [UInt8] {
        var names: [String: Int] = [:]
        var nameList: [String] = []
        func intern(_ s: String) -> Int {
            if let i = names[s] { return i }
            names[s] = nameList.count
            nameList.append(s)
            return nameList.count - 1
        }
        var body = ByteWriter(capacity: changeset.instructions.count * 48)
        for instruction in changeset.instructions {
            func head(_ tag: Tag, _ table: String, _ key: FerryValue) {
                body.byte(tag.rawValue)
                body.varint(UInt64(intern(table)))
                ValueCodec.encode(key, into: &body)
            }
            switch instruction {
            case let .create(table, key, fields):
                head(.create, table, key)
                body.varint(UInt64(fields.count))
                for f in fields {
                    body.varint(UInt64(intern(f.name)))
                    ValueCodec.encode(f.value, into: &body)
                }
            case let .erase(table, key):
                head(.erase, table, key)
            case let .set(table, key, field, value):
                head(.set, table, key); body.varint(UInt64(intern(field))); ValueCodec.encode(value, into: &body)
            case let .addInteger(table, key, field, delta):
                head(.addInteger, table, key); body.varint(UInt64(intern(field))); body.signed(delta)
            case let .listInsert(table, key, field, index, value):
                head(.listInsert, table, key); body.varint(UInt64(intern(field))); body.varint(UInt64(index)); ValueCodec.encode(value, into: &body)
            case let .listSet(table, key, field, index, value):
                head(.listSet, table, key); body.varint(UInt64(intern(field))); body.varint(UInt64(index)); ValueCodec.encode(value, into: &body)
            case let .listErase(table, key, field, index):
                head(.listErase, table, key); body.varint(UInt64(intern(field))); body.varint(UInt64(index))
            case let .listClear(table, key, field):
                head(.listClear, table, key); body.varint(UInt64(intern(field)))
            }
        }
        var out = ByteWriter(capacity: body.bytes.count + 64)
        out.byte(version)
        out.signed(changeset.timestamp)
        out.varint(UInt64(nameList.count))
        for n in nameList { out.string(n) }
        out.varint(UInt64(changeset.instructions.count))
        out.raw(body.bytes)
        return out.bytes
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
