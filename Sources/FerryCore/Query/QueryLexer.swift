/// Splits a query string into tokens. Works on UTF-8 bytes; every failure is a `FerryError`
/// of code `.query` naming the byte offset.
struct QueryLexer {
    private let bytes: [UInt8]
    private var pos = 0

    init(_ text: String) { bytes = Array(text.utf8) }

    static func tokenize(_ text: String) throws -> [QueryToken] {
        var lexer = QueryLexer(text)
        var out: [QueryToken] = []
        while true {
            let t = try lexer.next()
            out.append(t)
            if t.kind == .end { return out }
        }
    }

    private func peek(_ k: Int = 0) -> UInt8? { pos + k < bytes.count ? bytes[pos + k] : nil }

    private static func isIdentStart(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x5f || c == 0x40 || c >= 0x80
    }
    private static func isIdentPart(_ c: UInt8) -> Bool { isIdentStart(c) || isDigit(c) }
    private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    mutating func next() throws -> QueryToken {
        while let c = peek(), c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d { pos += 1 }
        let start = pos
        guard let c = peek() else { return QueryToken(kind: .end, offset: pos) }
        // Timestamp literal T<seconds>:<nanoseconds>, e.g. T1700000000:0 or T-5:500.
        if c == UInt8(ascii: "T"), let n = peek(1), Self.isDigit(n) || (n == UInt8(ascii: "-") && peek(2).map(Self.isDigit) == true) {
            pos += 1
            let seconds = try integerLiteral(start: start)
            guard peek() == UInt8(ascii: ":") else { throw error(at: pos, "expected ':' in timestamp literal") }
            pos += 1
            let nanos = try integerLiteral(start: start)
            guard nanos >= 0 && nanos < 1_000_000_000 else { throw error(at: start, "timestamp nanoseconds must be in 0...999999999") }
            return QueryToken(kind: .timestamp(seconds, Int32(nanos)), offset: start)
        }
        if Self.isIdentStart(c) {
            while let d = peek(), Self.isIdentPart(d) { pos += 1 }
            let word = String(decoding: bytes[start..<pos], as: UTF8.self)
            if (word == "oid" || word == "uuid") && peek() == UInt8(ascii: "(") {
                pos += 1
                let textStart = pos
                while let d = peek(), d != UInt8(ascii: ")") { pos += 1 }
                guard peek() != nil else { throw error(at: start, "expected ')' after \(word)(") }
                let text = String(decoding: bytes[textStart..<pos], as: UTF8.self).trimmingSpaces
                pos += 1
                do {
                    if word == "oid" { return QueryToken(kind: .value(.objectId(try ObjectId(hex: text))), offset: start) }
                    return QueryToken(kind: .value(.uuid(try FerryUUID(string: text))), offset: start)
                } catch let e as FerryError {
                    throw error(at: start, e.message)
                }
            }
            return QueryToken(kind: .identifier(String(decoding: bytes[start..<pos], as: UTF8.self)), offset: start)
        }
        if Self.isDigit(c) || (c == UInt8(ascii: "-") && peek(1).map { Self.isDigit($0) || $0 == UInt8(ascii: ".") } == true)
            || (c == UInt8(ascii: ".") && peek(1).map(Self.isDigit) == true) {
            return try number(start: start)
        }
        if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") { return try string(quote: c, start: start) }
        if c == UInt8(ascii: "$") {
            pos += 1
            guard let d = peek(), Self.isDigit(d) else { throw error(at: start, "expected an argument number after '$'") }
            var n = 0
            while let d = peek(), Self.isDigit(d) {
                n = n * 10 + Int(d - 0x30)
                guard n < 1_000_000 else { throw error(at: start, "argument number too large") }
                pos += 1
            }
            return QueryToken(kind: .argument(n), offset: start)
        }
        let two = peek(1).map { String(decoding: [c, $0], as: UTF8.self) } ?? ""
        for op in ["==", "!=", "<>", "<=", ">=", "&&", "||", "=<", "=>"] where two == op {
            pos += 2
            let canonical = ["<>": "!=", "=<": "<=", "=>": ">="][op] ?? op
            return QueryToken(kind: .symbol(canonical), offset: start)
        }
        let singles: [UInt8: String] = [0x3d: "==", 0x3c: "<", 0x3e: ">", 0x21: "!", 0x28: "(", 0x29: ")",
                                        0x7b: "{", 0x7d: "}", 0x5b: "[", 0x5d: "]", 0x2c: ",", 0x2e: "."]
        if let s = singles[c] {
            pos += 1
            return QueryToken(kind: .symbol(s), offset: start)
        }
        throw error(at: start, "unexpected character '\(String(decoding: [c], as: UTF8.self))'")
    }

    private mutating func integerLiteral(start: Int) throws -> Int64 {
        var negative = false
        if peek() == UInt8(ascii: "-") { negative = true; pos += 1 }
        guard let first = peek(), Self.isDigit(first) else { throw error(at: pos, "expected digits") }
        var value: Int64 = 0
        while let d = peek(), Self.isDigit(d) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(d - 0x30))
            guard !o1 && !o2 else { throw error(at: start, "number too large") }
            value = a
            pos += 1
        }
        return negative ? -value : value
    }

    private mutating func number(start: Int) throws -> QueryToken {
        if peek() == UInt8(ascii: "-") { pos += 1 }
        var isDouble = false
        while let d = peek() {
            if Self.isDigit(d) { pos += 1 }
            else if d == UInt8(ascii: "."), !isDouble, peek(1).map(Self.isDigit) == true { isDouble = true; pos += 1 }
            else if (d == UInt8(ascii: "e") || d == UInt8(ascii: "E")) {
                isDouble = true
                pos += 1
                if let s = peek(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") { pos += 1 }
                guard let e = peek(), Self.isDigit(e) else { throw error(at: start, "malformed number exponent") }
            } else { break }
        }
        if let d = peek(), Self.isIdentStart(d) { throw error(at: start, "malformed number") }
        let text = String(decoding: bytes[start..<pos], as: UTF8.self)
        if isDouble {
            guard let v = Double(text), v.isFinite else { throw error(at: start, "malformed number '\(text)'") }
            return QueryToken(kind: .double(v), offset: start)
        }
        guard let v = Int64(text) else { throw error(at: start, "integer '\(text)' does not fit in 64 bits") }
        return QueryToken(kind: .integer(v), offset: start)
    }

    private mutating func string(quote: UInt8, start: Int) throws -> QueryToken {
        pos += 1
        var out: [UInt8] = []
        while true {
            guard let c = peek() else { throw error(at: start, "unterminated string") }
            pos += 1
            if c == quote { break }
            if c != UInt8(ascii: "\\") { out.append(c); continue }
            guard let e = peek() else { throw error(at: start, "unterminated string") }
            pos += 1
            switch e {
            case UInt8(ascii: "n"): out.append(0x0a)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0d)
            case UInt8(ascii: "0"): out.append(0)
            case UInt8(ascii: "u"):
                var scalar: UInt32 = 0
                for _ in 0..<4 {
                    guard let h = peek(), let v = hexDigitValue(h) else { throw error(at: pos, "expected 4 hex digits after \\u") }
                    scalar = scalar << 4 | UInt32(v)
                    pos += 1
                }
                guard let u = Unicode.Scalar(scalar) else { throw error(at: pos, "\\u escape is not a Unicode scalar") }
                out.append(contentsOf: Array(String(Character(u)).utf8))
            default: out.append(e) // \" \' \\ and anything else stand for themselves
            }
        }
        return QueryToken(kind: .string(String(decoding: out, as: UTF8.self)), offset: start)
    }

    private func error(at offset: Int, _ message: String) -> FerryError {
        FerryError(.query, "bad query at offset \(offset): \(message)")
    }
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while s.first == " " { s = s.dropFirst() }
        while s.last == " " { s = s.dropLast() }
        return String(s)
    }
}
