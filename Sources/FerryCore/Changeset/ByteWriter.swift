/// Appends Ferry's binary encodings to a byte array: LEB128 varints, zigzag for signed values.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    public mutating func byte(_ b: UInt8) { bytes.append(b) }

    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Overwrites four bytes written earlier (little-endian), for counts known only later.
    public mutating func patchUInt32(at offset: Int, _ v: UInt32) {
        guard offset >= 0, offset + 4 <= bytes.count else { return }
        for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) }
    }

    public mutating func varint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            bytes.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func signed(_ v: Int64) { varint(UInt64(bitPattern: (v << 1) ^ (v >> 63))) }

    public mutating func raw<C: Collection>(_ data: C) where C.Element == UInt8 { bytes.append(contentsOf: data) }

    /// Appends raw bytes with one copy (the generic path goes byte by byte for raw buffers).
    public mutating func raw(_ data: UnsafeRawBufferPointer) { bytes.append(contentsOf: data.typed) }

    public mutating func lengthPrefixed<C: Collection>(_ data: C) where C.Element == UInt8 {
        varint(UInt64(data.count))
        bytes.append(contentsOf: data)
    }

    public mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { lengthPrefixed($0) }
    }

    public mutating func double(_ d: Double) {
        let bits = d.bitPattern
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: bits >> (8 * UInt64(i)))) }
    }
}

extension UnsafeRawBufferPointer {
    /// The same bytes as a typed buffer, which `Array.append(contentsOf:)` copies in one go.
    var typed: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: baseAddress?.assumingMemoryBound(to: UInt8.self), count: count)
    }
}
