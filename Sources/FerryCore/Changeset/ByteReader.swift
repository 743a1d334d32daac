/// Reads what `ByteWriter` wrote, treating the input as hostile: every read is bounds-checked
/// and every failure is a `FerryError(.corrupt)`, never a trap.
public struct ByteReader {
    private let bytes: [UInt8]
    public private(set) var position = 0

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var remaining: Int { bytes.count - position }
    public var isAtEnd: Bool { position >= bytes.count }

    func corrupt(_ what: String) -> FerryError { FerryError(.corrupt, "malformed data at byte \(position): \(what)") }

    public mutating func byte() throws -> UInt8 {
        guard position < bytes.count else { throw corrupt("unexpected end") }
        defer { position += 1 }
        return bytes[position]
    }

    public mutating func varint() throws -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw corrupt("varint overflows 64 bits") }
            result |= UInt64(b & 0x7f) << shift
            if b & 0x80 == 0 { return result }
            shift += 7
            if shift > 63 { throw corrupt("varint too long") }
        }
    }

    public mutating func signed() throws -> Int64 {
        let v = try varint()
        return Int64(bitPattern: (v >> 1) ^ (0 &- (v & 1)))
    }

    /// A count that must fit in what is left (each counted item takes at least `minSize` bytes).
    public mutating func count(minSize: Int = 1) throws -> Int {
        let v = try varint()
        guard v <= UInt64(remaining / max(minSize, 1)) else { throw corrupt("count \(v) larger than the data") }
        return Int(v)
    }

    public mutating func raw(_ n: Int) throws -> ArraySlice<UInt8> {
        guard n >= 0, n <= remaining else { throw corrupt("wanted \(n) bytes, \(remaining) left") }
        defer { position += n }
        return bytes[position..<position + n]
    }

    public mutating func lengthPrefixed() throws -> ArraySlice<UInt8> { try raw(try count()) }

    public mutating func string() throws -> String {
        let n = try count()
        let start = position
        let s: String? = bytes.withUnsafeBufferPointer { all in
            let p = UnsafeBufferPointer(rebasing: all[start..<start + n])
            // ASCII (most keys and names) is valid UTF-8 as it is: checked byte by byte here,
            // which costs a tenth of the generic validation.
            var high: UInt8 = 0
            for b in p { high |= b }
            if high < 0x80 { return String(decoding: p, as: UTF8.self) }
            return String(validating: p, as: UTF8.self)
        }
        guard let s else { throw corrupt("invalid UTF-8 in a string") }
        position += n
        return s
    }

    /// Twelve bytes as an ObjectId (no array made for them).
    public mutating func objectId() throws -> ObjectId {
        guard remaining >= 12 else { throw corrupt("wanted 12 bytes, \(remaining) left") }
        defer { position += 12 }
        return bytes.withUnsafeBytes { ObjectId(raw: $0.baseAddress! + position) }
    }

    public mutating func uint32() throws -> UInt32 {
        let data = try raw(4)
        var v: UInt32 = 0
        for (i, b) in data.enumerated() { v |= UInt32(b) << (8 * UInt32(i)) }
        return v
    }

    public mutating func double() throws -> Double {
        let data = try raw(8)
        var bits: UInt64 = 0
        for (i, b) in data.enumerated() { bits |= UInt64(b) << (8 * UInt64(i)) }
        return Double(bitPattern: bits)
    }
}
