import CFerry
import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// Converts a host value (`ferry_value_t`) into a Ferry value, checking the tag and the bytes.
func ferryValue(from v: ferry_value_t, _ what: @autoclosure () -> String = "value") throws -> FerryValue {
    try borrowedValue(from: v, what()).value
}

/// `borrowedValue(from:)` for a value in host memory that stays valid for the call: an
/// ObjectId is then borrowed in place too.
func borrowedValue(at p: UnsafePointer<ferry_value_t>, _ what: @autoclosure () -> String) throws -> BorrowedValue {
    if p.pointee.type == 7, let offset = unionOffset {
        return .objectIdBytes(UnsafeRawPointer(p) + offset)
    }
    return try borrowedValue(from: p.pointee, what())
}

/// Where the union (and so an ObjectId's bytes) sits in a `ferry_value_t`, and where the value
/// sits in a `ferry_property_value_t`.
private let unionOffset = MemoryLayout<ferry_value_t>.offset(of: \ferry_value_t.u)
let propertyValueOffset = MemoryLayout<ferry_property_value_t>.offset(of: \ferry_property_value_t.value)

/// A host value as a `BorrowedValue`: its bytes stay in the host's buffer (valid for the
/// duration of the call). The one place host values are checked: the tag, NULL data, sizes,
/// UTF-8, timestamp nanoseconds.
func borrowedValue(from v: ferry_value_t, _ what: @autoclosure () -> String) throws -> BorrowedValue {
    switch v.type {
    case 0: return .null
    case 1: return .bool(v.u.b)
    case 2: return .int(v.u.i)
    case 3: return .double(v.u.d)
    case 4:
        let n = v.u.string.size
        if n == 0 { return .string(UnsafeBufferPointer(start: nil, count: 0)) }
        guard let p = v.u.string.data else { throw FerryError(.invalidArgument, "\(what()): string data is NULL with size \(n)") }
        guard n <= Int32.max else { throw FerryError(.invalidArgument, "\(what()): string of \(n) bytes is too large") }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: n)
        guard isValidUTF8(bytes) else { throw FerryError(.invalidArgument, "\(what()): string is not valid UTF-8") }
        return .string(bytes)
    case 5:
        let n = v.u.binary.size
        if n == 0 { return .binary(UnsafeBufferPointer(start: nil, count: 0)) }
        guard let p = v.u.binary.data else { throw FerryError(.invalidArgument, "\(what()): binary data is NULL with size \(n)") }
        guard n <= Int32.max else { throw FerryError(.invalidArgument, "\(what()): binary of \(n) bytes is too large") }
        return .binary(UnsafeBufferPointer(start: p, count: n))
    case 6:
        do { return .timestamp(try Timestamp(seconds: v.u.timestamp.seconds, nanoseconds: v.u.timestamp.nanoseconds)) }
        catch let e as FerryError { throw FerryError(.invalidArgument, "\(what()): \(e.message)") }
    case 7: return .objectId(ObjectId(tuple: v.u.object_id))
    case 8: return withUnsafeBytes(of: v.u.uuid) { BorrowedValue.uuid(bytes: $0) }
    case 9:
        throw FerryError(.wrongType, "\(what()): FERRY_TYPE_LINK is a property type; pass the target's primary key value")
    default:
        throw FerryError(.wrongType, "\(what()): unknown value type \(v.type)")
    }
}

/// Whether bytes are UTF-8; ASCII, the common case, skips the general validator.
func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for b in bytes where b >= 0x80 { return String(validating: bytes, as: UTF8.self) != nil }
    return true
}

func ferryValue(at p: UnsafePointer<ferry_value_t>?, _ what: String) throws -> FerryValue {
    guard let p else { throw FerryError(.invalidArgument, "\(what) must not be NULL") }
    return try ferryValue(from: p.pointee, what)
}

func ferryValues(_ p: UnsafePointer<ferry_value_t>?, _ count: Int, _ what: String) throws -> [FerryValue] {
    guard count > 0 else { return [] }
    guard let p else { throw FerryError(.invalidArgument, "\(what) is NULL but its count is \(count)") }
    return try (0..<count).map { try ferryValue(from: p[$0], "\(what)[\($0)]") }
}

/// C views of Ferry values whose strings and binaries live in buffers this object owns, so
/// they stay valid for the owner's lifetime (an object snapshot, or one callback).
final class CValueStorage {
    private var buffers: [UnsafeMutableRawPointer] = []

    deinit { for b in buffers { free(b) } }

    func cValue(_ v: FerryValue) -> ferry_value_t {
        var out = ferry_value_t()
        switch v {
        case .null, .list: out.type = 0
        case .bool(let b): out.type = 1; out.u.b = b
        case .int(let i): out.type = 2; out.u.i = i
        case .double(let d): out.type = 3; out.u.d = d
        case .string(let s):
            out.type = 4
            let p = mallocString(s)
            buffers.append(UnsafeMutableRawPointer(p))
            out.u.string.data = UnsafePointer(p)
            out.u.string.size = s.utf8.count
        case .binary(let b):
            out.type = 5
            let p = malloc(max(b.count, 1))!
            b.withUnsafeBytes { if let base = $0.baseAddress { memcpy(p, base, b.count) } }
            buffers.append(p)
            out.u.binary.data = UnsafePointer(p.assumingMemoryBound(to: UInt8.self))
            out.u.binary.size = b.count
        case .timestamp(let t):
            out.type = 6
            out.u.timestamp.seconds = t.seconds
            out.u.timestamp.nanoseconds = t.nanoseconds
        case .objectId(let o):
            out.type = 7
            withUnsafeMutableBytes(of: &out.u.object_id) { dst in o.array.withUnsafeBytes { dst.copyMemory(from: $0) } }
        case .uuid(let u):
            out.type = 8
            withUnsafeMutableBytes(of: &out.u.uuid) { dst in u.array.withUnsafeBytes { dst.copyMemory(from: $0) } }
        }
        return out
    }

    /// A malloc'd array of C values (nil when empty), owned by this storage.
    func cArray(_ values: [FerryValue]) -> UnsafePointer<ferry_value_t>? {
        guard !values.isEmpty else { return nil }
        let p = malloc(MemoryLayout<ferry_value_t>.stride * values.count)!.assumingMemoryBound(to: ferry_value_t.self)
        for (i, v) in values.enumerated() { p[i] = cValue(v) }
        buffers.append(UnsafeMutableRawPointer(p))
        return UnsafePointer(p)
    }

    func cString(_ s: String) -> UnsafePointer<CChar> {
        let p = mallocString(s)
        buffers.append(UnsafeMutableRawPointer(p))
        return UnsafePointer(p)
    }
}
