/// Ferry's one JSON value (issue 25): what the client's auth and Data API answers, the server's
/// stored sync-log details and log lines, and the app directory's kept settings are read into.
/// Foundation-free (it goes into libferry.so). Parsing treats its input as hostile: depth and
/// number length are bounded, numbers are exact (an integer lexeme is an `Int64`, out of range
/// is an error, never a rounded double; a fraction or an exponent makes a finite `Double`),
/// strings must be valid UTF-8, and every error is a thrown `FerryError`. Fuzzed
/// (fuzz/targets/json.swift, remotejson.swift, extendedjson.swift). Object members keep their
/// order.
public indirect enum JSON: Sendable, Equatable, Codable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    /// How deep `parse` nests by default.
    public static let maxDepth = 64

    public static func == (a: JSON, b: JSON) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.double(x), .double(y)): return x == y
        case let (.string(x), .string(y)): return x == y
        case let (.array(x), .array(y)): return x == y
        case let (.object(x), .object(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// The first member named `key` of an object (nil for anything else).
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }

    /// A number as a Double, whichever way it was written.
    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// Serialises a JSON object of strings (what the auth requests send).
    public static func encodeObject(_ members: [(String, String)]) -> String {
        "{" + members.map { quote($0.0) + ":" + quote($0.1) }.joined(separator: ",") + "}"
    }

    public static func quote(_ s: String) -> String { JSONText.quote(s) }

    /// Parses one JSON document, nested at most `maxDepth` deep.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = JSON.maxDepth) throws -> JSON {
        var p = JSONParser(bytes: bytes, maxDepth: maxDepth)
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.fail("trailing characters") }
        return v
    }

    /// The compact JSON text.
    public var text: String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text as UTF-8: one buffer for the whole value, not a string per
    /// member (the server's sync log writes one per upload, on the upload's path; issue 23).
    /// A double that is not finite is written as null (JSON has no such number).
    public func write(into out: inout [UInt8]) {
        switch self {
        case .string(let s): JSONText.appendQuoted(s, to: &out)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): out.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (n, v) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (n, (k, v)) in members.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(k, to: &out)
                out.append(UInt8(ascii: ":"))
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Through `Codable` (the server's JSON encoders and decoders): an object's keys come sorted,
    /// since a keyed container does not keep the document's order.
    public init(from decoder: any Decoder) throws {
        // Each `try?` below asks what kind of JSON value this is; a no moves on to the next kind.
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            self = .object(try keyed.allKeys.sorted { $0.stringValue < $1.stringValue }.map { ($0.stringValue, try keyed.decode(JSON.self, forKey: $0)) })
            return
        }
        if var list = try? decoder.unkeyedContainer() {
            var items: [JSON] = []
            while !list.isAtEnd { items.append(try list.decode(JSON.self)) }
            self = .array(items)
            return
        }
        // One value: the `try?` below ask which kind, as above.
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null }
        else if let b = try? single.decode(Bool.self) { self = .bool(b) }
        else if let i = try? single.decode(Int64.self) { self = .int(i) }
        else if let d = try? single.decode(Double.self) { self = .double(d) }
        else { self = .string(try single.decode(String.self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .string(let s): var c = encoder.singleValueContainer(); try c.encode(s)
        case .int(let i): var c = encoder.singleValueContainer(); try c.encode(i)
        case .double(let d): var c = encoder.singleValueContainer(); try c.encode(d)
        case .bool(let b): var c = encoder.singleValueContainer(); try c.encode(b)
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for v in items { try c.encode(v) }
        case .object(let members):
            var c = encoder.container(keyedBy: Key.self)
            for (k, v) in members { try c.encode(v, forKey: Key(stringValue: k)) }
        }
    }
}

/// The parser behind `JSON.parse`, open to Ferry's modules that read a document as it streams
/// past (the client's Data API pages keep each document's text).
package struct JSONParser {
    package let bytes: [UInt8]
    package var i = 0
    package let maxDepth: Int
    /// The longest number lexeme taken.
    static let maxNumberLength = 128

    package init(bytes: [UInt8], maxDepth: Int = JSON.maxDepth) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    package func fail(_ what: String) -> FerryError { FerryError(.corrupt, "malformed JSON at byte \(i): \(what)") }

    package mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    /// One value, nested `depth` deep already.
    package mutating func value(depth: Int) throws -> JSON {
        guard depth < maxDepth else { throw fail("nested too deeply") }
        skipSpace()
        guard i < bytes.count else { throw fail("unexpected end") }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            var members: [(String, JSON)] = []
            try self.members { p, key in members.append((key, try p.value(depth: depth + 1))) }
            return .object(members)
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
        case UInt8(ascii: "t"): i += 4; guard i <= bytes.count, bytes[i - 4..<i].elementsEqual("true".utf8) else { throw fail("unexpected characters") }; return .bool(true)
        case UInt8(ascii: "f"): i += 5; guard i <= bytes.count, bytes[i - 5..<i].elementsEqual("false".utf8) else { throw fail("unexpected characters") }; return .bool(false)
        case UInt8(ascii: "n"): i += 4; guard i <= bytes.count, bytes[i - 4..<i].elementsEqual("null".utf8) else { throw fail("unexpected characters") }; return .null
        default: return try number()
        }
    }

    /// The members of the object at `i`: `body` reads each member's value after its key.
    package mutating func members(_ body: (inout JSONParser, String) throws -> Void) throws {
        skipSpace()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { throw fail("expected an object") }
        i += 1
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected a key") }
            let k = try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            i += 1
            try body(&self, k)
            skipSpace()
            guard i < bytes.count else { throw fail("unexpected end") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard bytes[i] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
            i += 1
            return
        }
    }

    /// JSON's number grammar, strictly: an integer lexeme is an exact Int64 (out of range is
    /// an error, never a rounded double); a fraction or an exponent makes a finite double.
    mutating func number() throws -> JSON {
        let start = i
        func isDigit(_ at: Int) -> Bool { at < bytes.count && bytes[at] >= 0x30 && bytes[at] <= 0x39 }
        if i < bytes.count, bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard isDigit(i) else { throw fail("bad number") }
        if bytes[i] == 0x30 { i += 1 } else { while isDigit(i) { i += 1 } }
        var integer = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            integer = false
            i += 1
            guard isDigit(i) else { throw fail("bad number") }
            while isDigit(i) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            integer = false
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard isDigit(i) else { throw fail("bad number") }
            while isDigit(i) { i += 1 }
        }
        guard i - start <= Self.maxNumberLength else { throw fail("number too long") }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if integer {
            guard let v = Int64(text) else { throw fail("integer out of the 64-bit range") }
            return .int(v)
        }
        guard let d = Double(text), d.isFinite else { throw fail("number out of the double range") }
        return .double(d)
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

    package mutating func string() throws -> String {
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
