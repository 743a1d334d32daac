/// The binary encoding of values, shared by the history, list columns and the sync protocol.
public enum ValueCodec {
    public enum Tag: UInt8 {
        case null = 0, falseValue, trueValue, int, double, string, binary, timestamp, objectId, uuid, list
    }

    public static func encode(_ v: FerryValue, into w: inout ByteWriter) {
        switch v {
        case .null: w.byte(Tag.null.rawValue)
        case .bool(let b): w.byte(b ? Tag.trueValue.rawValue : Tag.falseValue.rawValue)
        case .int(let i): w.byte(Tag.int.rawValue); w.signed(i)
        case .double(let d): w.byte(Tag.double.rawValue); w.double(d)
        case .string(let s): w.byte(Tag.string.rawValue); w.string(s)
        case .binary(let b): w.byte(Tag.binary.rawValue); w.lengthPrefixed(b)
        case .timestamp(let t): w.byte(Tag.timestamp.rawValue); w.signed(t.seconds); w.varint(UInt64(t.nanoseconds))
        case .objectId(let o): w.byte(Tag.objectId.rawValue); withUnsafeBytes(of: o.bytes) { w.raw($0) }
        case .uuid(let u): w.byte(Tag.uuid.rawValue); w.raw(u.array)
        case .list(let items):
            w.byte(Tag.list.rawValue)
            w.varint(UInt64(items.count))
            for item in items { encode(item, into: &w) }
        }
    }

    public static func encode(_ v: FerryValue) -> [UInt8] {
        var w = ByteWriter()
        encode(v, into: &w)
        return w.bytes
    }

    /// Decodes one value. Lists may not nest (`allowList` is false inside a list).
    public static func decode(from r: inout ByteReader, allowList: Bool = true) throws -> FerryValue {
        let raw = try r.byte()
        guard let tag = Tag(rawValue: raw) else { throw r.corrupt("unknown value tag \(raw)") }
        switch tag {
        case .null: return .null
        case .falseValue: return .bool(false)
        case .trueValue: return .bool(true)
        case .int: return .int(try r.signed())
        case .double: return .double(try r.double())
        case .string: return .string(try r.string())
        case .binary: return .binary(Array(try r.lengthPrefixed()))
        case .timestamp:
            let s = try r.signed()
            let n = try r.varint()
            guard n < 1_000_000_000 else { throw r.corrupt("timestamp nanoseconds out of range") }
            return .timestamp(try Timestamp(seconds: s, nanoseconds: Int32(n)))
        case .objectId: return .objectId(try r.objectId())
        case .uuid: return .uuid(try FerryUUID(bytes: Array(try r.raw(16))))
        case .list:
            guard allowList else { throw r.corrupt("nested list") }
            let n = try r.count()
            var items: [FerryValue] = []
            items.reserveCapacity(n)
            for _ in 0..<n { items.append(try decode(from: &r, allowList: false)) }
            return .list(items)
        }
    }

    public static func decode(_ bytes: [UInt8]) throws -> FerryValue {
        var r = ByteReader(bytes)
        let v = try decode(from: &r)
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after a value") }
        return v
    }
}
