#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif
import Foundation

/// Ferry's values in MongoDB Extended JSON (v2, relaxed), as the Data API reads and writes
/// them, so code written against Atlas's Data API reads them as it did:
/// ObjectId `{"$oid": "hex"}`, UUID `{"$uuid": "8-4-4-4-12"}`, binary
/// `{"$binary": {"base64": ..., "subType": "00"}}`, timestamp `{"$date": "ISO 8601 UTC"}`
/// (milliseconds, or nanoseconds when the value has them: Ferry's timestamps are finer than
/// BSON dates; years outside 0000-9999 in ISO 8601's expanded form, `+010000-...`), int and finite
/// double as JSON numbers (a double always has a fraction or exponent), a non-finite double as
/// `{"$numberDouble": "NaN" | "Infinity" | "-Infinity"}`, a list as an array, a link as its
/// target's primary key.
enum DataAPIValues {
    // MARK: writing

    /// An object as a JSON document: its properties in schema order.
    static func appendDocument(_ values: [FerryValue], schema os: ObjectSchema, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (i, p) in os.properties.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(p.name, to: &out)
            out.append(UInt8(ascii: ":"))
            append(i < values.count ? values[i] : .null, to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }

    static func append(_ v: FerryValue, to out: inout [UInt8]) {
        switch v {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if d.isFinite {
                out.append(contentsOf: "\(d)".utf8)
            } else {
                out.append(contentsOf: #"{"$numberDouble":""#.utf8)
                out.append(contentsOf: (d.isNaN ? "NaN" : d > 0 ? "Infinity" : "-Infinity").utf8)
                out.append(contentsOf: #""}"#.utf8)
            }
        case .string(let s): JSONText.appendQuoted(s, to: &out)
        case .binary(let b):
            out.append(contentsOf: #"{"$binary":{"base64":""#.utf8)
            out.append(contentsOf: Data(b).base64EncodedString().utf8)
            out.append(contentsOf: #"","subType":"00"}}"#.utf8)
        case .timestamp(let t): appendDate(t, to: &out)
        case .objectId(let o):
            out.append(contentsOf: #"{"$oid":""#.utf8)
            out.append(contentsOf: o.description.utf8)
            out.append(contentsOf: #""}"#.utf8)
        case .uuid(let u):
            out.append(contentsOf: #"{"$uuid":""#.utf8)
            out.append(contentsOf: u.description.utf8)
            out.append(contentsOf: #""}"#.utf8)
        case .list(let items):
            out.append(UInt8(ascii: "["))
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                append(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// Seconds of 0000-01-01 and of 10000-01-01: the years an ISO date shows with four
    /// digits; others take ISO 8601's expanded form (a sign and six or more digits, as
    /// JavaScript writes them), so every Ferry timestamp has an exact text.
    static let isoRange: Range<Int64> = -62_167_219_200..<253_402_300_800

    private static func appendDate(_ t: Timestamp, to out: inout [UInt8]) {
        let (days, rest) = floorDivision(t.seconds, 86_400)
        let (y, m, d) = civil(fromDays: days)
        let year = (0...9999).contains(y) ? pad(y, 4) : (y < 0 ? "-" : "+") + pad(y.magnitude, 6)
        var text = year + "-" + pad(m, 2) + "-" + pad(d, 2) + "T" + pad(rest / 3600, 2) + ":" + pad(rest / 60 % 60, 2) + ":" + pad(rest % 60, 2)
        let ns = Int64(t.nanoseconds)
        text += ns % 1_000_000 == 0 ? "." + pad(ns / 1_000_000, 3) : "." + pad(ns, 9)
        out.append(contentsOf: #"{"$date":""#.utf8)
        out.append(contentsOf: text.utf8)
        out.append(contentsOf: #"Z"}"#.utf8)
    }

    /// Quotient rounded down and a remainder in 0..<d.
    private static func floorDivision(_ n: Int64, _ d: Int64) -> (Int64, Int64) {
        let (q, r) = n.quotientAndRemainder(dividingBy: d)
        return r < 0 ? (q - 1, r + d) : (q, r)
    }

    private static func pad<N: BinaryInteger>(_ n: N, _ width: Int) -> String {
        let s = String(n)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`, with floor division: any day, before 1970 too).
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

    /// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
    static func days(year y0: Int64, month m: Int64, day d: Int64) -> Int64 {
        let y = m <= 2 ? y0 - 1 : y0
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    // MARK: reading

    /// The start of a rejected text, for a message (self-contained: the fuzz target compiles
    /// this file alone with FerryCore).
    private static func short(_ text: String, limit: Int) -> String {
        text.utf8.count <= limit ? text : String(decoding: text.utf8.prefix(limit), as: UTF8.self) + "..."
    }

    struct Invalid: Error {
        let message: String
        init(_ message: String) { self.message = message }
    }

    /// A value given in a request (a query argument, a primary key). Plain JSON numbers are
    /// ints when whole, else doubles.
    static func value(_ json: JSON) throws -> FerryValue {
        switch json {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .int(let i): return .int(i)
        case .double(let d): return .double(d)
        case .string(let s): return .string(s)
        case .array(let items): return .list(try items.map(value))
        case .object(let members):
            guard members.count == 1, let (tag, inner) = members.first else {
                throw Invalid("an object is not a value here; use an Extended JSON form such as {\"$oid\": ...}")
            }
            switch (tag, inner) {
            case ("$oid", .string(let hex)):
                do { return .objectId(try ObjectId(hex: hex)) } catch { throw Invalid("\"$oid\" needs 24 hexadecimal digits, got \(short(hex, limit: 40))") }
            case ("$uuid", .string(let text)):
                do { return .uuid(try FerryUUID(string: text)) } catch { throw Invalid("\"$uuid\" needs a UUID like 8-4-4-4-12 hex digits") }
            case ("$numberLong", .string(let text)), ("$numberInt", .string(let text)):
                guard let i = Int64(text) else { throw Invalid("\(tag) is not a 64-bit integer: \(short(text, limit: 40))") }
                return .int(i)
            case ("$numberDouble", .string(let text)):
                switch text {
                case "NaN": return .double(.nan)
                case "Infinity": return .double(.infinity)
                case "-Infinity": return .double(-.infinity)
                default:
                    guard let d = Double(text) else { throw Invalid("$numberDouble is not a number: \(short(text, limit: 40))") }
                    return .double(d)
                }
            case ("$binary", .object(let fields)):
                guard let base64 = fields.first(where: { $0.0 == "base64" }).flatMap({ if case .string(let s) = $0.1 { return s } else { return nil } }),
                      let data = Data(base64Encoded: base64) else { throw Invalid("\"$binary\" needs {\"base64\": ..., \"subType\": \"00\"}") }
                return .binary(Array(data))
            case ("$date", .string(let iso)): return .timestamp(try date(iso))
            case ("$date", .object(let fields)):
                guard fields.count == 1, fields[0].0 == "$numberLong", case .string(let text) = fields[0].1, let ms = Int64(text) else {
                    throw Invalid("\"$date\" needs an ISO 8601 string or {\"$numberLong\": milliseconds}")
                }
                let (seconds, rem) = ms.quotientAndRemainder(dividingBy: 1000)
                let (s, r) = rem < 0 ? (seconds - 1, rem + 1000) : (seconds, rem)
                return .timestamp(try Timestamp(seconds: s, nanoseconds: Int32(r) * 1_000_000))
            case ("$date", .int(let ms)):
                return try value(.object([("$date", .object([("$numberLong", .string(String(ms)))]))]))
            default:
                throw Invalid("unknown Extended JSON form \(short(tag, limit: 40))")
            }
        }
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (UTC only, 1 to 9 fraction digits), the year also in
    /// ISO 8601's expanded form (`+YYYYYY`, `-YYYYYY`: a sign and 6 to 12 digits).
    static func date(_ text: String) throws -> Timestamp {
        var b = Array(text.utf8)
        let bad = Invalid("\"$date\" needs an ISO 8601 UTC time such as 2026-11-29T10:00:00.000Z, got \(short(text, limit: 40))")
        func digits(_ at: Int, _ n: Int) -> Int64? {
            guard at >= 0, n > 0, at + n <= b.count else { return nil }
            var v: Int64 = 0
            for c in b[at..<at + n] {
                guard c >= 48 && c <= 57 else { return nil }
                v = v * 10 + Int64(c - 48)
            }
            return v
        }
        // The year: four digits, or a sign and 6 to 12.
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
        // A day past the month's end (February 30th) is refused, not rolled over.
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

    /// A document's value for property `p`: a list for a list, null only where the schema
    /// allows it (an optional property, a link), a whole number for a double property taken
    /// as a double, otherwise exactly the property's type (a link: its target's key type).
    static func field(_ json: JSON, for p: Property) throws -> FerryValue {
        let type = p.type == .link ? (p.linkKeyType ?? .string) : p.type
        if p.isList {
            guard case .array(let items) = json else { throw Invalid("a list property takes a JSON array") }
            return .list(try items.map { try element($0, type: type, nullable: p.isOptional) })
        }
        return try element(json, type: type, nullable: p.isOptional || p.type == .link)
    }

    private static func element(_ json: JSON, type: PropertyType, nullable: Bool) throws -> FerryValue {
        let v = try value(json)
        if case .null = v {
            guard nullable else { throw Invalid("null is not allowed: the property is required") }
            return v
        }
        if type == .double, case .int(let i) = v { return .double(Double(i)) }
        guard v.type == type else { throw Invalid("expected \(type), got \(v.type.map { "\($0)" } ?? "a list")") }
        return v
    }

    /// A request's value as a primary key of `type`: a whole JSON number for an int key, the
    /// Extended JSON form for the others.
    static func primaryKey(_ json: JSON, of type: PropertyType) throws -> FerryValue {
        let v = try value(json)
        guard v.type == type else { throw Invalid("the primary key must be of type \(type), got \(v.type.map { "\($0)" } ?? "null or a list")") }
        return v
    }
}

extension FerryValue {
    /// The value in the Data API's Extended JSON.
    var json: String {
        var out: [UInt8] = []
        DataAPIValues.append(self, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
