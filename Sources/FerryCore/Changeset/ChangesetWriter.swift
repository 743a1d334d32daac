/// Builds the binary form of a changeset (see `ChangesetCodec`) one instruction at a time.
///
/// Consecutive creates in one table with the same fields are written as one *create run*: the
/// table and field names once, then per object each value front-coded against the same
/// column of the previous object (the length of the shared prefix of their encodings, then
/// the rest). Bulk inserts of similar objects — sequential ObjectIds, "item-1", "item-2" —
/// shrink to about a third, which the history writes and sync uploads.
public struct ChangesetWriter {
    private var names: [String: Int] = [:]
    private var nameList: [String] = []
    private var body: ByteWriter
    public private(set) var count = 0

    /// The open create run: its table and field names, where its row count sits in `body`,
    /// and the previous object's encoded values, per column (the key first).
    private var runTable = -1
    private var runFields: [Int] = []
    private var runCountOffset = 0
    private var runRows: UInt32 = 0
    private var previous = RunColumns()

    public init(capacity: Int = 256) { body = ByteWriter(capacity: capacity) }

    /// About how large the encoded changeset is so far (to cut downloads into chunks).
    public var byteCount: Int { body.bytes.count }

    /// The index of a class or property name in this changeset's name table.
    public mutating func intern(_ s: String) -> Int {
        if let i = names[s] { return i }
        names[s] = nameList.count
        nameList.append(s)
        return nameList.count - 1
    }

    public var isEmpty: Bool { count == 0 }

    private mutating func head(_ tag: ChangesetCodec.Tag, _ table: Int, _ key: FerryValue) {
        closeRun()
        count += 1
        body.byte(tag.rawValue)
        body.varint(UInt64(table))
        ValueCodec.encode(key, into: &body)
    }

    // MARK: creates

    /// Starts a create of an object whose fields (interned names, in the order their values
    /// will follow) are `fields`; follow with `createKey` and one `createField` per field.
    public mutating func beginCreate(table: Int, fields: UnsafeBufferPointer<Int>) {
        count += 1
        if runTable == table, runRows < UInt32.max, runFields.elementsEqual(fields) {
            runRows += 1
            return
        }
        closeRun()
        runTable = table
        runFields = Array(fields)
        body.byte(ChangesetCodec.Tag.createRun.rawValue)
        body.varint(UInt64(table))
        body.varint(UInt64(fields.count))
        for f in fields { body.varint(UInt64(f)) }
        runCountOffset = body.bytes.count
        body.raw([0, 0, 0, 0])
        runRows = 1
        previous = RunColumns(count: fields.count + 1)
    }

    public mutating func createKey(_ key: BorrowedValue) { key.withEncodedParts { frontCode(0, $0, $1) } }
    public mutating func createKey(_ key: FerryValue) { owned(0, key) }
    /// The value of the `index`th field given to `beginCreate`.
    public mutating func createField(_ index: Int, _ value: BorrowedValue) { value.withEncodedParts { frontCode(index + 1, $0, $1) } }
    public mutating func createField(_ index: Int, _ value: FerryValue) { owned(index + 1, value) }

    private mutating func owned(_ column: Int, _ value: FerryValue) {
        let bytes = ValueCodec.encode(value)
        bytes.withUnsafeBytes { frontCode(column, $0, UnsafeRawBufferPointer(start: nil, count: 0)) }
    }

    /// Writes one value, given as its encoding's two parts, as (shared prefix length, rest)
    /// against the column's previous value, and keeps it as the column's previous value.
    /// Values of up to 64 encoded bytes (nearly all) are assembled on the stack and appended
    /// to the body in one piece.
    private mutating func frontCode(_ column: Int, _ header: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) {
        let total = header.count + payload.count
        guard total <= 64 else { return frontCodeLarge(column, header, payload) }
        var current = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var chunk = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &current) { cur in
            guard let c = cur.baseAddress else { return }
            if let h = header.baseAddress { c.copyMemory(from: h, byteCount: header.count) }
            if let p = payload.baseAddress { (c + header.count).copyMemory(from: p, byteCount: payload.count) }
            let value = UnsafeRawBufferPointer(start: c, count: total)
            let shared = previous.sharedPrefix(column, value)
            withUnsafeMutableBytes(of: &chunk) { out in
                guard let o = out.baseAddress else { return }
                var n = 0
                func varint(_ v: Int) {
                    var v = UInt64(v)
                    while v >= 0x80 { o.storeBytes(of: UInt8(v & 0x7f) | 0x80, toByteOffset: n, as: UInt8.self); n += 1; v >>= 7 }
                    o.storeBytes(of: UInt8(v), toByteOffset: n, as: UInt8.self); n += 1
                }
                varint(shared)
                varint(total - shared)
                (o + n).copyMemory(from: c + shared, byteCount: total - shared)
                n += total - shared
                body.raw(UnsafeRawBufferPointer(start: o, count: n))
            }
            previous.replace(column, from: shared, value)
        }
    }

    private mutating func frontCodeLarge(_ column: Int, _ header: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) {
        var value = [UInt8](header.typed)
        value.append(contentsOf: payload.typed)
        value.withUnsafeBytes { v in
            let shared = previous.sharedPrefix(column, v)
            body.varint(UInt64(shared))
            body.varint(UInt64(v.count - shared))
            body.raw(UnsafeRawBufferPointer(rebasing: v[shared...]))
            previous.replace(column, from: shared, v)
        }
    }

    private mutating func closeRun() {
        guard runTable >= 0 else { return }
        body.patchUInt32(at: runCountOffset, runRows)
        runTable = -1
    }

    // MARK: whole instructions

    public mutating func append(_ instruction: Instruction) {
        switch instruction {
        case let .create(table, key, fields):
            let names = fields.map { intern($0.name) }
            names.withUnsafeBufferPointer { beginCreate(table: intern(table), fields: $0) }
            createKey(key)
            for (i, f) in fields.enumerated() { createField(i, f.value) }
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
        var me = self
        me.closeRun()
        var out = ByteWriter(capacity: me.body.bytes.count + 16 + nameList.count * 16)
        out.byte(ChangesetCodec.version)
        out.signed(timestamp)
        out.varint(UInt64(nameList.count))
        for n in nameList { out.string(n) }
        out.varint(UInt64(count))
        out.raw(me.body.bytes)
        return out.bytes
    }
}

/// The previous object's encoded values in a create run, one raw buffer per column,
/// whose tails are replaced in place (no Array bookkeeping on the bulk-insert path).
final class RunColumns {
    private var buffers: [UnsafeMutableRawPointer?]
    private var counts: [Int]
    private var capacities: [Int]

    init(count: Int = 0) {
        buffers = Array(repeating: nil, count: count)
        counts = Array(repeating: 0, count: count)
        capacities = Array(repeating: 0, count: count)
    }

    deinit { for b in buffers { b?.deallocate() } }

    /// How many leading bytes the column's value shares with `value` (8 bytes at a time).
    func sharedPrefix(_ column: Int, _ value: UnsafeRawBufferPointer) -> Int {
        guard let p = buffers[column], let v = value.baseAddress else { return 0 }
        let n = min(counts[column], value.count)
        var i = 0
        while i + 8 <= n && p.loadUnaligned(fromByteOffset: i, as: UInt64.self) == v.loadUnaligned(fromByteOffset: i, as: UInt64.self) { i += 8 }
        while i < n && p.load(fromByteOffset: i, as: UInt8.self) == v.load(fromByteOffset: i, as: UInt8.self) { i += 1 }
        return i
    }

    /// Makes the column's value `value`, given that its first `shared` bytes agree.
    func replace(_ column: Int, from shared: Int, _ value: UnsafeRawBufferPointer) {
        let total = value.count
        if capacities[column] < total {
            let capacity = max(total, 32, capacities[column] * 2)
            let grown = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 8)
            if let old = buffers[column] {
                grown.copyMemory(from: old, byteCount: counts[column])
                old.deallocate()
            }
            buffers[column] = grown
            capacities[column] = capacity
        }
        counts[column] = total
        guard let p = buffers[column], let v = value.baseAddress else { return }
        if shared < total { (p + shared).copyMemory(from: v + shared, byteCount: total - shared) }
    }
}
