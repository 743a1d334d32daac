/// A 16-byte UUID, compared and ordered by its bytes.
public struct FerryUUID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let array: [UInt8]

    public init(bytes: [UInt8]) throws {
        guard bytes.count == 16 else { throw FerryError(.invalidArgument, "a UUID has 16 bytes, got \(bytes.count)") }
        array = bytes
    }

    /// Parses the canonical 8-4-4-4-12 hexadecimal form.
    public init(string: String) throws {
        let digits = Array(string.utf8).filter { $0 != UInt8(ascii: "-") }
        guard digits.count == 32, string.utf8.count == 36 else { throw FerryError(.invalidArgument, "not a UUID: '\(string)'") }
        var out = [UInt8]()
        for i in 0..<16 {
            guard let hi = hexDigitValue(digits[2 * i]), let lo = hexDigitValue(digits[2 * i + 1]) else {
                throw FerryError(.invalidArgument, "not a UUID: '\(string)'")
            }
            out.append(hi << 4 | lo)
        }
        array = out
    }

    /// The all-zero UUID.
    public static let nilUUID = FerryUUID(zeroes: ())
    private init(zeroes: ()) { array = [UInt8](repeating: 0, count: 16) }

    public var description: String {
        let h = hexString(array)
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }

    public static func < (a: FerryUUID, b: FerryUUID) -> Bool { a.array.lexicographicallyPrecedes(b.array) }
}
