#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

/// MongoDB Extended JSON v2 (relaxed), as the server's Data API writes Ferry's values
/// (docs/backend.md; the server's codec is `DataAPIValues`, which libferry.so does not link):
/// ObjectId `{"$oid": "24 hex"}`, UUID `{"$uuid": "8-4-4-4-12"}`, timestamp `{"$date": "ISO
/// 8601 UTC"}` (milliseconds or nanoseconds; years outside 0000-9999 in the expanded form
/// `+010000-...`), binary `{"$binary": {"base64": ..., "subType": "00"}}`, int a JSON number
/// without fraction or exponent (read exactly: Int64.min and max included), double a number
/// with a fraction or exponent or `{"$numberDouble": "NaN" | "Infinity" | "-Infinity"}`,
/// string, bool and null as JSON, a list as an array, a link as its target's primary key.
///
/// The reader treats its input as hostile (it comes off the network): depth and number
/// lengths are bounded, every error is a thrown `FerryError(.corrupt)`, nothing traps.
public enum ExtendedJSON {
    /// JSON as read, numbers kept exact: an integer lexeme is an Int64, never a Double.
    /// A JSON value with its numbers exact: FerryCore's `JSON`.
    public typealias Raw = JSON

    /// One document of a `find` answer: its text as the server sent it, and its fields
    /// decoded, in the document's order.
    public struct Document: Sendable {
        public let text: String
        public let fields: [(name: String, value: FerryValue)]

        public func value(_ name: String) -> FerryValue? { fields.first { $0.name == name }?.value }
    }

    /// A `find` answer: `{"documents": [...], "next"?: cursor}`.
    public struct FindPage: Sendable {
        public let documents: [Document]
        public let next: String?
    }

    /// A `count` answer: `{"count": n, "next"?: cursor}`.
    public struct CountPage: Sendable {
        public let count: Int
        public let next: String?
    }

    static let maxDepth = 32
    /// A number's text longer than this is refused (no value Ferry writes comes close).
    static let maxNumberLength = 128

    public static func parse(_ bytes: [UInt8]) throws -> Raw {
        var p = JSONParser(bytes: bytes, maxDepth: maxDepth)
        let v = try p.value(depth: 0)
        p.skipSpace()
        guard p.i == bytes.count else { throw p.fail("trailing characters") }
        return v
    }

    public static func findPage(_ bytes: [UInt8]) throws -> FindPage {
        var p = JSONParser(bytes: bytes, maxDepth: maxDepth)
        var documents: [Document]?
        var next: String?
        try p.members { p, key in
            switch key {
            case "documents":
                p.skipSpace()
                guard p.i < p.bytes.count, p.bytes[p.i] == UInt8(ascii: "[") else { throw p.fail("documents is not an array") }
                p.i += 1
                var out: [Document] = []
                p.skipSpace()
                if p.i < p.bytes.count, p.bytes[p.i] == UInt8(ascii: "]") { p.i += 1; documents = out; return }
                while true {
                    p.skipSpace()
                    let start = p.i
                    let raw = try p.value(depth: 2)
                    let text = String(decoding: p.bytes[start..<p.i], as: UTF8.self)
                    guard case .object(let members) = raw else { throw p.fail("a document is not an object") }
                    out.append(Document(text: text, fields: try members.map { (name, v) in
                        do { return (name, try value(v)) } catch let e as FerryError {
                            throw FerryError(.corrupt, "the server's document has a field '\(name)' that is not an Extended JSON value: \(e.message)")
                        }
                    }))
                    p.skipSpace()
                    guard p.i < p.bytes.count else { throw p.fail("unexpected end") }
                    if p.bytes[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
                    guard p.bytes[p.i] == UInt8(ascii: "]") else { throw p.fail("expected ',' or ']'") }
                    p.i += 1
                    documents = out
                    return
                }
            case "next":
                guard case .string(let s) = try p.value(depth: 1) else { throw p.fail("next is not a string") }
                next = s
            default:
                _ = try p.value(depth: 1)
            }
        }
        p.skipSpace()
        guard p.i == bytes.count else { throw p.fail("trailing characters") }
        guard let documents else { throw FerryError(.corrupt, "the server's find answer has no documents") }
        return FindPage(documents: documents, next: next)
    }

    public static func countPage(_ bytes: [UInt8]) throws -> CountPage {
        guard case .object(let members) = try parse(bytes) else { throw FerryError(.corrupt, "the server's count answer is not an object") }
        guard case .int(let n)? = members.first(where: { $0.0 == "count" })?.1, n >= 0, n <= Int64(Int.max) else {
            throw FerryError(.corrupt, "the server's count answer has no count that is a whole number of at least 0")
        }
        var next: String?
        if let raw = members.first(where: { $0.0 == "next" })?.1 {
            guard case .string(let s) = raw else { throw FerryError(.corrupt, "the server's count answer has a next that is not a string") }
            next = s
        }
        return CountPage(count: Int(n), next: next)
    }

    // MARK: values

    /// A Ferry value from its Extended JSON, by its own encoding (no schema: a whole number is
    /// an int, one with a fraction or an exponent a double). A list holds no lists.
    public static func value(_ raw: Raw, inList: Bool = false) throws -> FerryValue {
        switch raw {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .array(let items):
            guard !inList else { throw FerryError(.corrupt, "a list inside a list") }
            return .list(try items.map { try value($0, inList: true) })
        case .object(let members):
            guard members.count == 1, let (tag, inner) = members.first else {
                throw FerryError(.corrupt, "an object that is not an Extended JSON value")
            }
            switch (tag, inner) {
            case ("$oid", .string(let hex)):
                do { return .objectId(try ObjectId(hex: hex)) } catch { throw FerryError(.corrupt, "\"$oid\" needs 24 hexadecimal digits") }
            case ("$uuid", .string(let text)):
                do { return .uuid(try FerryUUID(string: text)) } catch { throw FerryError(.corrupt, "\"$uuid\" needs 8-4-4-4-12 hexadecimal digits") }
            case ("$numberLong", .string(let text)), ("$numberInt", .string(let text)):
                guard text.utf8.count <= maxNumberLength, let i = Int64(text) else { throw FerryError(.corrupt, "\(tag) is not a 64-bit integer") }
                return .int(i)
            case ("$numberDouble", .string(let text)):
                switch text {
                case "NaN": return .double(.nan)
                case "Infinity": return .double(.infinity)
                case "-Infinity": return .double(-.infinity)
                default:
                    guard text.utf8.count <= maxNumberLength, let d = Double(text) else { throw FerryError(.corrupt, "$numberDouble is not a number") }
                    return .double(d)
                }
            case ("$binary", .object(let fields)):
                guard case .string(let text)? = fields.first(where: { $0.0 == "base64" })?.1, let bytes = base64Decode(text) else {
                    throw FerryError(.corrupt, "\"$binary\" needs {\"base64\": ..., \"subType\": \"00\"}")
                }
                return .binary(bytes)
            case ("$date", .string(let iso)): return .timestamp(try date(iso))
            case ("$date", .object(let fields)):
                guard fields.count == 1, fields[0].0 == "$numberLong", case .string(let text) = fields[0].1, text.utf8.count <= maxNumberLength,
                      let ms = Int64(text) else { throw FerryError(.corrupt, "\"$date\" needs an ISO 8601 string or {\"$numberLong\": milliseconds}") }
                return .timestamp(try milliseconds(ms))
            case ("$date", .int(let ms)): return .timestamp(try milliseconds(ms))
            default:
                throw FerryError(.corrupt, "unknown Extended JSON form")
            }
        }
    }

    private static func milliseconds(_ ms: Int64) throws -> Timestamp {
        let (q, r) = ms.quotientAndRemainder(dividingBy: 1000)
        let (s, rest) = r < 0 ? (q - 1, r + 1000) : (q, r)
        return try Timestamp(seconds: s, nanoseconds: Int32(rest) * 1_000_000)
    }

    /// Appends a value as the Data API reads it in a request (a query argument): ints as
    /// `{"$numberLong": ...}` and doubles as `{"$numberDouble": ...}`, so the server takes
    /// neither for the other whatever its JSON decoder does with a whole number.
    public static func appendArgument(_ v: FerryValue, to out: inout [UInt8]) {
        switch v {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .int(let i): out += Array(#"{"$numberLong":""#.utf8) + Array(String(i).utf8) + Array(#""}"#.utf8)
        case .double(let d):
            let text = d.isNaN ? "NaN" : d.isInfinite ? (d > 0 ? "Infinity" : "-Infinity") : "\(d)"
            out += Array(#"{"$numberDouble":""#.utf8) + Array(text.utf8) + Array(#""}"#.utf8)
        case .string(let s): JSONText.appendQuoted(s, to: &out)
        case .binary(let b): out += Array(#"{"$binary":{"base64":""#.utf8) + Array(base64Encode(b).utf8) + Array(#"","subType":"00"}}"#.utf8)
        case .timestamp(let t): out += Array(#"{"$date":""#.utf8) + Array(dateText(t).utf8) + Array(#""}"#.utf8)
        case .objectId(let o): out += Array(#"{"$oid":""#.utf8) + Array(o.description.utf8) + Array(#""}"#.utf8)
        case .uuid(let u): out += Array(#"{"$uuid":""#.utf8) + Array(u.description.utf8) + Array(#""}"#.utf8)
        case .list(let items):
            out.append(UInt8(ascii: "["))
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                appendArgument(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    // MARK: dates (the server's `DataAPIValues` rules: an exact text for every instant)

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, or nine fraction digits when the instant has them; years
    /// outside 0000-9999 as a sign and six or more digits.
    public static func dateText(_ t: Timestamp) -> String {
        let (days, rest) = floorDivision(t.seconds, 86_400)
        let (y, m, d) = civil(fromDays: days)
        let year = (0...9999).contains(y) ? pad(y, 4) : (y < 0 ? "-" : "+") + pad(y.magnitude, 6)
        var text = year + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(rest / 3600, 2) + ":" + pad(rest / 60 % 60, 2) + ":" + pad(rest % 60, 2)
        let ns = Int64(t.nanoseconds)
        text += ns % 1_000_000 == 0 ? "." + pad(ns / 1_000_000, 3) : "." + pad(ns, 9)
        return text + "Z"
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC only, 1 to 9 fraction digits), the year also in
    /// the expanded form (a sign and 6 to 12 digits). February 30th is refused, and an instant
    /// past Int64's seconds too.
    public static func date(_ text: String) throws -> Timestamp {
        var b = Array(text.utf8)
        let bad = FerryError(.corrupt, "\"$date\" is not an ISO 8601 UTC time")
        guard b.count <= 64 else { throw bad }
        func digits(_ at: Int, _ n: Int) -> Int64? {
            guard at >= 0, n > 0, n <= 12, at + n <= b.count else { return nil }
            var v: Int64 = 0
            for c in b[at..<at + n] {
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            return v
        }
        var year: Int64
        if let first = b.first, first == UInt8(ascii: "+") || first == UInt8(ascii: "-") {
            var n = 1
            while n < b.count, b[n] >= 48, b[n] <= 57 { n += 1 }
            guard (7...13).contains(n), let y = digits(1, n - 1) else { throw bad }
            year = first == UInt8(ascii: "-") ? -y : y
            b = Array("0000".utf8) + b[n...]
        } else {
            guard let y = digits(0, 4) else { throw bad }
            year = y
        }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"), b[13] == UInt8(ascii: ":"),
              b[16] == UInt8(ascii: ":"), b.last == UInt8(ascii: "Z"),
              let mo = digits(5, 2), let d = digits(8, 2), let h = digits(11, 2), let mi = digits(14, 2), let s = digits(17, 2),
              (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, s < 60 else { throw bad }
        var ns: Int64 = 0
        if b.count > 20 {
            let n = b.count - 21
            guard b[19] == UInt8(ascii: "."), (1...9).contains(n), let f = digits(20, n) else { throw bad }
            ns = f
            for _ in n..<9 { ns *= 10 }
        } else {
            guard b.count == 20 else { throw bad }
        }
        let day = days(year: year, month: mo, day: d)
        guard civil(fromDays: day) == (year, mo, d) else { throw bad }
        // Before 1970 the day's start may lie just below Int64.min while its instant does not:
        // counted from the next day's start then.
        let timeOfDay = h * 3600 + mi * 60 + s
        let (daySeconds, o1) = (day >= 0 ? day : day + 1).multipliedReportingOverflow(by: 86_400)
        let (seconds, o2) = daySeconds.addingReportingOverflow(day >= 0 ? timeOfDay : timeOfDay - 86_400)
        guard !o1, !o2 else { throw bad }
        return try Timestamp(seconds: seconds, nanoseconds: Int32(ns))
    }

    private static func floorDivision(_ n: Int64, _ d: Int64) -> (Int64, Int64) {
        let (q, r) = n.quotientAndRemainder(dividingBy: d)
        return r < 0 ? (q - 1, r + d) : (q, r)
    }

    private static func pad<N: BinaryInteger>(_ n: N, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    /// Howard Hinnant's `civil_from_days`, with floor division (any day, before 1970 too).
    static func civil(fromDays z0: Int64) -> (Int64, Int64, Int64) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// Hinnant's `days_from_civil`. Years are at most 12 digits, so nothing overflows.
    static func days(year y0: Int64, month m: Int64, day d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    // MARK: base64 (RFC 4648, with padding)

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    public static func base64Encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Strict: a multiple of four characters, `=` only as the last one or two.
    public static func base64Decode(_ text: String) -> [UInt8]? {
        let c = Array(text.utf8)
        guard c.count % 4 == 0 else { return nil }
        func sextet(_ x: UInt8) -> UInt8? {
            switch x {
            case 65...90: return x - 65
            case 97...122: return x - 97 + 26
            case 48...57: return x - 48 + 52
            case UInt8(ascii: "+"): return 62
            case UInt8(ascii: "/"): return 63
            default: return nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(c.count / 4 * 3)
        var i = 0
        while i < c.count {
            let last = i + 4 == c.count
            let pad = last ? (c[i + 3] == UInt8(ascii: "=") ? (c[i + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
            guard let s0 = sextet(c[i]), let s1 = sextet(c[i + 1]) else { return nil }
            out.append(s0 << 2 | s1 >> 4)
            if pad < 2 {
                guard let s2 = sextet(c[i + 2]) else { return nil }
                out.append((s1 & 0x0F) << 4 | s2 >> 2)
                if pad < 1 {
                    guard let s3 = sextet(c[i + 3]) else { return nil }
                    out.append((s2 & 0x03) << 6 | s3)
                }
            }
            i += 4
        }
        return out
    }
}
