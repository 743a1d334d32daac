/// Builds the binary form of a changeset (see `ChangesetCodec`) one instruction at a time.
/// Besides whole `Instruction`s it takes a create written field by field with pre-interned
/// names, so the store can log a bulk insert without building an `Instruction` per row.
public struct ChangesetWriter {
    private var names: [String: Int] = [:]
    private var nameList: [String] = []
    private var body: ByteWriter
    public private(set) var count = 0

    public init(capacity: Int = 256) { body = ByteWriter(capacity: capacity) }

    /// The index of a class or property name in this changeset's name table.
    public mutating func intern(_ s: String) -> Int {
        if let i = names[s] { return i }
        names[s] = nameList.count
        nameList.append(s)
        return nameList.count - 1
    }

    private mutating func head(_ tag: ChangesetCodec.Tag, _ table: Int, _ key: FerryValue) {
        count += 1
        body.byte(tag.rawValue)
        body.varint(UInt64(table))
        ValueCodec.encode(key, into: &body)
    }

    /// Starts a create; follow with exactly `fieldCount` calls to `field`.
    public mutating func beginCreate(table: Int, key: FerryValue, fieldCount: Int) {
        head(.create, table, key)
        body.varint(UInt64(fieldCount))
    }

    /// Starts a create whose key is borrowed; follow with exactly `fieldCount` fields.
    public mutating func beginCreate(table: Int, key: BorrowedValue, fieldCount: Int) {
        count += 1
        body.byte(ChangesetCodec.Tag.create.rawValue)
        body.varint(UInt64(table))
        key.encode(into: &body)
        body.varint(UInt64(fieldCount))
    }

    public mutating func field(_ name: Int, _ value: BorrowedValue) {
        body.varint(UInt64(name))
        value.encode(into: &body)
    }

    public var isEmpty: Bool { count == 0 }

    public mutating func field(_ name: Int, _ value: FerryValue) {
        body.varint(UInt64(name))
        ValueCodec.encode(value, into: &body)
    }

    public mutating func append(_ instruction: Instruction) {
        switch instruction {
        case let .create(table, key, fields):
            beginCreate(table: intern(table), key: key, fieldCount: fields.count)
            for f in fields { field(intern(f.name), f.value) }
        case let .erase(table, key):
            head(.erase, intern(table), key)
        case let .set(table, key, f, value):
            head(.set, intern(table), key); body.varint(UInt64(intern(f))); ValueCodec.encode(value, into: &body)
        case let .addInteger(table, key, f, delta):
            head(.addInteger, intern(table), key); body.varint(UInt64(intern(f))); body.signed(delta)
        case let .listInsert(table, key, f, index, value):
            head(.listInsert, intern(table), key); body.varint(UInt64(intern(f))); body.varint(UInt64(index)); ValueCodec.encode(value, into: &body)
        case let .listSet(table, key, f, index, value):
            head(.listSet, intern(table), key); body.varint(UInt64(intern(f))); body.varint(UInt64(index)); ValueCodec.encode(value, into: &body)
        case let .listErase(table, key, f, index):
            head(.listErase, intern(table), key); body.varint(UInt64(intern(f))); body.varint(UInt64(index))
        case let .listClear(table, key, f):
            head(.listClear, intern(table), key); body.varint(UInt64(intern(f)))
        }
    }

    /// The encoded changeset.
    public func finish(timestamp: Int64) -> [UInt8] {
        var out = ByteWriter(capacity: body.bytes.count + 16 + nameList.count * 16)
        out.byte(ChangesetCodec.version)
        out.signed(timestamp)
        out.varint(UInt64(nameList.count))
        for n in nameList { out.string(n) }
        out.varint(UInt64(count))
        out.raw(body.bytes)
        return out.bytes
    }
}
