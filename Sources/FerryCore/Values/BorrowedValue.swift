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
        case .objectId: return .objectId
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

    /// Appends the same bytes `ValueCodec.encode` writes for `value`.
    public func encode(into w: inout ByteWriter) {
        switch self {
        case .string(let s):
            w.byte(ValueCodec.Tag.string.rawValue)
            w.lengthPrefixed(s)
        case .binary(let b):
            w.byte(ValueCodec.Tag.binary.rawValue)
            w.lengthPrefixed(b)
        case .objectId(let o):
            w.byte(ValueCodec.Tag.objectId.rawValue)
            withUnsafeBytes(of: o.bytes) { w.raw($0) }
        default:
            ValueCodec.encode(value, into: &w)
        }
    }
}
