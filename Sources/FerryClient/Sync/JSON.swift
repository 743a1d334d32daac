#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

/// The little JSON the auth API speaks (no Foundation in libferry.so). Parsing treats its
/// input as hostile: depth and size are bounded, every error is a thrown `FerryError`.
public indirect enum JSON: Equatable, Sendable {
    case null, bool(Bool), number(Double), string(String), array([JSON]), object([(String, JSON)])

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.number(x), .number(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }

    /// Serialises a JSON object of strings (what the auth requests send).
    public static func encodeObject(_ members: [(String, String)]) -> String {
        "{" + members.map { quote($0.0) + ":" + quote($0.1) }.joined(separator: ",") + "}"
    }

    public static func quote(_ s: String) -> String { JSONText.quote(s) }

    public static func parse(_ bytes: [UInt8]) throws -> JSON {
        var p = JSONParser(bytes: bytes)
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.fail("trailing characters") }
        return v
    }
}

struct JSONParser {
    let bytes: [UInt8]
    var i = 0
    static let maxDepth = 64

    func fail(_ what: String) -> FerryError { FerryError(.corrupt, "malformed JSON at byte \(i): \(what)") }

    mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    mutating func literal(_ word: String, _ v: JSON) throws -> JSON {
        let w = Array(word.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { throw fail("unexpected characters") }
        i += w.count
        return v
    }

    mutating func value(depth: Int) throws -> JSON {
        guard depth < Self.maxDepth else { throw fail("nested too deeply") }
        skipSpace()
        guard i < bytes.count else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            i += 1
            var members: [(String, JSON)] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            while true {
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let k = try string()
                skipSpace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                members.append((k, try value(depth: depth + 1)))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                guard bytes[i] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
                i += 1
                return .object(members)
            }
        case UInt8(ascii: "["):
            i += 1
            var items: [JSON] = []
            skipSpace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard i < bytes.count else { throw fail("unexpected end") }
                if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
                guard bytes[i] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
                i += 1
                return .array(items)
            }
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        default: return try number()
        }
    }

    mutating func number() throws -> JSON {
        let start = i
        while i < bytes.count, let c = Optional(bytes[i]), (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "e") || c == UInt8(ascii: "E") { i += 1 }
        guard i > start, i - start < 64, let d = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else { throw fail("bad number") }
        return .number(d)
    }

    mutating func hex4() throws -> UInt32 {
        guard i + 4 <= bytes.count else { throw fail("short \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[i]
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            default: throw fail("bad \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    mutating func string() throws -> String {
        i += 1 // the opening quote
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw fail("unterminated string") }
            let c = bytes[i]
            i += 1
            if c == UInt8(ascii: "\"") { break }
            if c != UInt8(ascii: "\\") { out.append(c); continue }
            guard i < bytes.count else { throw fail("unterminated escape") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00, i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") {
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw fail("bad surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let u = Unicode.Scalar(scalar) else { throw fail("bad code point") }
                out.append(contentsOf: Array(String(u).utf8))
            default: throw fail("bad escape")
            }
        }
        guard let s = String(validating: out, as: UTF8.self) else { throw fail("invalid UTF-8") }
        return s
    }
}
