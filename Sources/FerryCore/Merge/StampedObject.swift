/// An object as the server keeps it for merging: each property's value with the stamp of the
/// write that set it and the server version where that happened (to tell concurrent writes
/// from ones the writer had already seen).
public struct StampedObject: Sendable, Equatable {
    public var values: [FerryValue]
    public var stamps: [Stamp]
    public var versions: [UInt64]

    /// A new object: every property at its default, then `fields`, all stamped `stamp`.
    public init(schema os: ObjectSchema, key: FerryValue, fields: [FieldValue], stamp: Stamp, version: UInt64) {
        values = os.properties.map { $0.defaultValue }
        values[os.primaryKeyIndex] = key
        stamps = Array(repeating: stamp, count: os.properties.count)
        versions = Array(repeating: version, count: os.properties.count)
        // Fields usually come in the schema's order (every SDK writes them so): each is
        // first looked for just after the previous one, then by name.
        var expected = 0
        for f in fields {
            if expected == os.primaryKeyIndex { expected += 1 }
            let i: Int
            if expected < os.properties.count, os.properties[expected].name == f.name { i = expected } else {
                guard let found = os.propertyIndex(named: f.name) else { continue }
                i = found
            }
            values[i] = f.value
            expected = i + 1
        }
    }

    public init(values: [FerryValue], stamps: [Stamp], versions: [UInt64]) {
        self.values = values
        self.stamps = stamps
        self.versions = versions
    }

    /// Moves every property written at server version `provisional` to `version`. The server
    /// merges an upload before it knows the version its commit will get (outside the app's
    /// write lock), at a provisional version above every real one, and stamps the real one
    /// when it commits. The merge only ever compares versions with the uploader's base, which
    /// is below both, so its outcome is the same as a merge at `version`.
    public mutating func restamp(_ provisional: UInt64, to version: UInt64) {
        for i in versions.indices where versions[i] == provisional { versions[i] = version }
    }

    /// The object as a create instruction carrying every property (how downloads send it).
    public func fullState(_ os: ObjectSchema) -> Instruction {
        var fields: [FieldValue] = []
        fields.reserveCapacity(values.count)
        for (i, p) in os.properties.enumerated() where i != os.primaryKeyIndex {
            fields.append(FieldValue(name: p.name, value: values[i]))
        }
        return .create(table: os.name, key: values[os.primaryKeyIndex], fields: fields)
    }

    // MARK: storage form

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 16 * values.count + 16)
        w.varint(UInt64(values.count))
        for i in values.indices {
            ValueCodec.encode(values[i], into: &w)
            w.signed(stamps[i].timestamp)
            w.varint(stamps[i].fileIdent)
            w.varint(versions[i])
        }
        return w.bytes
    }

    /// Decodes the storage form for a schema; a count that differs from the schema's is corrupt.
    public static func decode(_ bytes: [UInt8], schema os: ObjectSchema) throws -> StampedObject {
        var r = ByteReader(bytes)
        let n = try r.count(minSize: 4)
        guard n == os.properties.count else { throw FerryError(.corrupt, "a stored '\(os.name)' object has \(n) properties, the schema \(os.properties.count)") }
        var o = StampedObject(values: [], stamps: [], versions: [])
        o.values.reserveCapacity(n); o.stamps.reserveCapacity(n); o.versions.reserveCapacity(n)
        for _ in 0..<n {
            o.values.append(try ValueCodec.decode(from: &r))
            let ts = try r.signed()
            o.stamps.append(Stamp(timestamp: ts, fileIdent: try r.varint()))
            o.versions.append(try r.varint())
        }
        guard r.isAtEnd else { throw FerryError(.corrupt, "trailing bytes after a stored '\(os.name)' object") }
        return o
    }
}
