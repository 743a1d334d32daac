/// A value whose string or bytes are borrowed from the caller's memory (a C buffer), for the
/// bulk-write path: it is checked, bound to SQLite and encoded into the history without ever
/// becoming a Swift `String`. Valid only while the caller's memory is.
public enum BorrowedValue {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(UnsafeBufferPointer<UInt8>)
    case binary(UnsafeBufferPointer<UInt8>)
    case timestamp(Timestamp)
    case objectId(ObjectId)
    /// An ObjectId whose 12 bytes stay where the caller has them (bound to SQLite uncopied).
    case objectIdBytes(UnsafeRawPointer)
    /// The 16 bytes of a UUID, as two big-endian halves, so the enum holds no references and
    /// copies for free.
    case uuid(UInt64, UInt64)

    public var type: PropertyType? {
        switch self {
        case .null: return nil
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .binary: return .binary
        case .timestamp: return .timestamp
        case .objectId, .objectIdBytes: return .objectId
        case .uuid: return .uuid
        }
    }

    /// An owned copy.
    public var value: FerryValue {
        switch self {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(String(decoding: s, as: UTF8.self))
        case .binary(let b): return .binary(Array(b))
        case .timestamp(let t): return .timestamp(t)
        case .objectId(let o): return .objectId(o)
        case .objectIdBytes(let p): return .objectId(ObjectId(raw: p))
        case let .uuid(hi, lo): return .uuid(Self.uuid(hi, lo))
        }
    }

    static func uuid(_ hi: UInt64, _ lo: UInt64) -> FerryUUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: hi >> (56 - 8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: lo >> (56 - 8 * UInt64(i)))
        }
        // Sixteen bytes always make a UUID.
        return (try? FerryUUID(bytes: bytes)) ?? FerryUUID.nilUUID
    }

    /// A borrowed UUID from its 16 bytes.
    public static func uuid(bytes: UnsafeRawBufferPointer) -> BorrowedValue {
        var hi: UInt64 = 0, lo: UInt64 = 0
        for i in 0..<8 { hi = hi << 8 | UInt64(bytes[i]); lo = lo << 8 | UInt64(bytes[8 + i]) }
        return .uuid(hi, lo)
    }

    /// Calls `body` with the bytes `ValueCodec.encode` writes for the value, in two parts: a
    /// short header built on the stack and the payload where it already lies (a string's or
    /// binary's bytes, an ObjectId's), so front coding needs no buffer.
    public func withEncodedParts<R>(_ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) -> R) -> R {
        var header = (UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &header) { h in
            var n = 0
            func put(_ b: UInt8) { h[n] = b; n += 1 }
            func varint(_ v: UInt64) {
                var v = v
                while v >= 0x80 { put(UInt8(v & 0x7f) | 0x80); v >>= 7 }
                put(UInt8(v))
            }
            func signed(_ v: Int64) { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }
            let empty = UnsafeRawBufferPointer(start: nil, count: 0)
            switch self {
            case .null: put(ValueCodec.Tag.null.rawValue)
            case .bool(let b): put(b ? ValueCodec.Tag.trueValue.rawValue : ValueCodec.Tag.falseValue.rawValue)
            case .int(let i): put(ValueCodec.Tag.int.rawValue); signed(i)
            case .double(let d):
                put(ValueCodec.Tag.double.rawValue)
                for i in 0..<8 { put(UInt8(truncatingIfNeeded: d.bitPattern >> (8 * UInt64(i)))) }
            case .timestamp(let t):
                put(ValueCodec.Tag.timestamp.rawValue); signed(t.seconds); varint(UInt64(t.nanoseconds))
            case let .uuid(hi, lo):
                put(ValueCodec.Tag.uuid.rawValue)
                for i in 0..<8 { put(UInt8(truncatingIfNeeded: hi >> (56 - 8 * UInt64(i)))) }
                for i in 0..<8 { put(UInt8(truncatingIfNeeded: lo >> (56 - 8 * UInt64(i)))) }
            case .string(let s):
                put(ValueCodec.Tag.string.rawValue); varint(UInt64(s.count))
                return body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(h)[..<n]), UnsafeRawBufferPointer(s))
            case .binary(let b):
                put(ValueCodec.Tag.binary.rawValue); varint(UInt64(b.count))
                return body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(h)[..<n]), UnsafeRawBufferPointer(b))
            case .objectId(let o):
                put(ValueCodec.Tag.objectId.rawValue)
                let header = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(h)[..<n])
                return withUnsafeBytes(of: o.bytes) { body(header, $0) }
            case .objectIdBytes(let p):
                put(ValueCodec.Tag.objectId.rawValue)
                return body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(h)[..<n]), UnsafeRawBufferPointer(start: p, count: 12))
            }
            return body(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(h)[..<n]), empty)
        }
    }
}
