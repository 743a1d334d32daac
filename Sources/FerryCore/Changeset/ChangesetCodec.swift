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
        var instructions: [Instruction] = []
        var runTable = ""
        var runFields: [String] = []
        let timestamp = try forEach(bytes, expecting: { instructions.reserveCapacity($0) },
                                    run: { table, fields in runTable = table; runFields = fields },
                                    row: { key, values in
                                        var fields: [FieldValue] = []
                                        fields.reserveCapacity(values.count)
                                        for (i, f) in runFields.enumerated() { fields.append(FieldValue(name: f, value: values[i])) }
                                        instructions.append(.create(table: runTable, key: key, fields: fields))
                                    },
                                    instruction: { instructions.append($0) })
        return Changeset(timestamp: timestamp, instructions: instructions)
    }

    /// Decodes a changeset without building it: each object of a create run is handed to
    /// `row` as its key and its values in the order of the run's fields (`run` names the class
    /// and the fields first; the values array is reused from one object to the next), every
    /// other instruction to `instruction`. `expecting` learns the instruction count first.
    /// A device integrating a bootstrap writes rows straight from here, with no `Instruction`
    /// or `FieldValue` per object (issue 23). The same checks as `decode`, which is built on
    /// it: anything malformed throws before the callback that would have seen it. Returns the
    /// changeset's timestamp.
    @discardableResult
    public static func forEach(_ bytes: [UInt8], expecting: (Int) -> Void = { _ in },
                               run: (_ table: String, _ fields: [String]) throws -> Void,
                               row: (_ key: FerryValue, _ values: [FerryValue]) throws -> Void,
                               instruction: (Instruction) throws -> Void) throws -> Int64 {
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
        expecting(count)
        var done = 0
        // Front-coded values may not expand past this (a hostile run could otherwise repeat a
        // large value for millions of two-byte rows).
        var expansionBudget = max(bytes.count * 64, 1 << 20)
        while done < count {
            let rawTag = try r.byte()
            guard let tag = Tag(rawValue: rawTag) else { throw r.corrupt("unknown instruction tag \(rawTag)") }
            let table = try name()
            if tag == .createRun {
                let fieldCount = try r.count()
                guard fieldCount < 4096 else { throw r.corrupt("create run with \(fieldCount) fields") }
                var fieldNames: [String] = []
                for _ in 0..<fieldCount { fieldNames.append(try name()) }
                let rows = Int(try r.uint32())
                guard rows >= 1, rows <= count - done, rows <= r.remaining / (2 * (fieldCount + 1)) else {
                    throw r.corrupt("create run of \(rows) objects does not fit")
                }
                try run(table, fieldNames)
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
                var values = [FerryValue](repeating: .null, count: fieldCount)
                for _ in 0..<rows {
                    let key = try next(0)
                    guard key.type?.canBePrimaryKey == true else { throw r.corrupt("an object key must be an objectId, string, int or uuid") }
                    for i in 0..<fieldCount { values[i] = try next(i + 1) }
                    try row(key, values)
                    done += 1
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
                try instruction(.create(table: table, key: key, fields: fields))
            case .erase: try instruction(.erase(table: table, key: key))
            case .set: try instruction(.set(table: table, key: key, field: try name(), value: try ValueCodec.decode(from: &r)))
            case .addInteger: try instruction(.addInteger(table: table, key: key, field: try name(), delta: try r.signed()))
            case .listInsert:
                let f = try name(); let i = try index()
                try instruction(.listInsert(table: table, key: key, field: f, index: i, value: try ValueCodec.decode(from: &r, allowList: false)))
            case .listSet:
                let f = try name(); let i = try index()
                try instruction(.listSet(table: table, key: key, field: f, index: i, value: try ValueCodec.decode(from: &r, allowList: false)))
            case .listErase:
                let f = try name()
                try instruction(.listErase(table: table, key: key, field: f, index: try index()))
            case .listClear: try instruction(.listClear(table: table, key: key, field: try name()))
            }
            done += 1
        }
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after the changeset") }
        return timestamp
    }
}
