/// A 12-byte ObjectId in MongoDB's and Realm's format: 4 bytes of seconds since the epoch
/// (big-endian), then 8 bytes that Ferry draws from the system's CSPRNG for every id. Primary
/// keys are global per class, so one id must not tell anyone the next ones (MongoDB's
/// per-process random part and counter would): ids made in the same second are not ordered.
public struct ObjectId: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var bytes: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)

    public init(bytes: [UInt8]) throws {
        guard bytes.count == 12 else { throw FerryError(.invalidArgument, "an ObjectId has 12 bytes, got \(bytes.count)") }
        self.bytes = (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5],
                      bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11])
    }

    public init(tuple: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)) {
        bytes = tuple
    }

    /// Reads 12 bytes from memory.
    public init(raw p: UnsafeRawPointer) {
        var t: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &t) { $0.copyMemory(from: UnsafeRawBufferPointer(start: p, count: 12)) }
        bytes = t
    }

    /// Parses 24 hexadecimal digits.
    public init(hex: String) throws {
        let digits = Array(hex.utf8)
        guard digits.count == 24 else { throw FerryError(.invalidArgument, "an ObjectId is 24 hex digits, got '\(hex)'") }
        var out = [UInt8](repeating: 0, count: 12)
        for i in 0..<12 {
            guard let hi = hexDigitValue(digits[2 * i]), let lo = hexDigitValue(digits[2 * i + 1]) else {
                throw FerryError(.invalidArgument, "an ObjectId is 24 hex digits, got '\(hex)'")
            }
            out[i] = hi << 4 | lo
        }
        try self.init(bytes: out)
    }

    /// A new ObjectId for the given time; the other 8 bytes come from
    /// `SystemRandomNumberGenerator` (getrandom(2) on Linux), fresh for each id.
    public static func generate(secondsSinceEpoch: UInt32) -> ObjectId {
        var g = SystemRandomNumberGenerator()
        let r: UInt64 = g.next()
        let t = UInt64(secondsSinceEpoch)
        func byte(_ v: UInt64, _ shift: UInt64) -> UInt8 { UInt8(truncatingIfNeeded: v >> shift) }
        return ObjectId(tuple: (byte(t, 24), byte(t, 16), byte(t, 8), byte(t, 0),
                                byte(r, 56), byte(r, 48), byte(r, 40), byte(r, 32),
                                byte(r, 24), byte(r, 16), byte(r, 8), byte(r, 0)))
    }

    public var array: [UInt8] {
        withUnsafeBytes(of: bytes) { Array($0) }
    }

    public var description: String { hexString(array) }

    public static func == (a: ObjectId, b: ObjectId) -> Bool {
        withUnsafeBytes(of: a.bytes) { pa in withUnsafeBytes(of: b.bytes) { pb in pa.elementsEqual(pb) } }
    }
    public func hash(into hasher: inout Hasher) { withUnsafeBytes(of: bytes) { hasher.combine(bytes: $0) } }
    public static func < (a: ObjectId, b: ObjectId) -> Bool { a.array.lexicographicallyPrecedes(b.array) }
}

func hexDigitValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}

func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(bytes.count * 2)
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
    return String(decoding: out, as: UTF8.self)
}
