import FerryCore
import FerrySQLite

/// How a property's values are stored in its SQLite column. Chosen so that SQLite's own
/// ordering of the stored form equals Ferry's ordering of the values, which lets equality and
/// range conditions run in SQL (and on indexes) with the same answers as the Swift evaluator:
/// bool and int as INTEGER, double as REAL (NaN, which SQLite cannot hold, as an 8-byte BLOB),
/// string as TEXT (compared bytewise), timestamp as a 12-byte big-endian BLOB with the sign
/// bit flipped, ObjectId and UUID as BLOBs, lists as one encoded BLOB.
enum ColumnCodec {
    static func bind(_ v: FerryValue, to s: Statement, at i: Int32) {
        switch v {
        case .null: s.bindNull(i)
        case .bool(let b): s.bind(i, Int64(b ? 1 : 0))
        case .int(let x): s.bind(i, x)
        case .double(let d):
            if d.isNaN { s.bind(i, blob: withUnsafeBytes(of: d.bitPattern.bigEndian) { Array($0) }) } else { s.bind(i, d) }
        case .string(let str): s.bind(i, str)
        case .binary(let b): s.bind(i, blob: b)
        case .timestamp(let t): s.bind(i, blob: timestampBytes(t))
        case .objectId(let o): withUnsafeBytes(of: o.bytes) { s.bind(i, raw: $0) }
        case .uuid(let u): s.bind(i, blob: u.array)
        case .list: s.bind(i, blob: ValueCodec.encode(v))
        }
    }

    /// Binds a borrowed value without copying its bytes: for the insert statement, which is
    /// stepped before the caller's buffers go away and has every parameter bound on each use.
    static func bind(_ v: BorrowedValue, to s: Statement, at i: Int32) {
        switch v {
        case .string(let b): s.bindTextNoCopy(i, b)
        case .binary(let b): s.bindBlobNoCopy(i, UnsafeRawBufferPointer(b))
        case .objectId(let o): withUnsafeBytes(of: o.bytes) { s.bind(i, raw: $0) }
        case .objectIdBytes(let p): s.bindBlobNoCopy(i, UnsafeRawBufferPointer(start: p, count: 12))
        case .bool(let b): s.bind(i, Int64(b ? 1 : 0))
        case .int(let x): s.bind(i, x)
        default: bind(v.value, to: s, at: i)
        }
    }

    static func timestampBytes(_ t: Timestamp) -> [UInt8] {
        let s = UInt64(bitPattern: t.seconds) ^ (1 << 63)
        let n = UInt32(t.nanoseconds)
        var out = [UInt8](repeating: 0, count: 12)
        for k in 0..<8 { out[k] = UInt8(truncatingIfNeeded: s >> (56 - 8 * UInt64(k))) }
        for k in 0..<4 { out[8 + k] = UInt8(truncatingIfNeeded: n >> (24 - 8 * UInt32(k))) }
        return out
    }

    /// Reads a column written by `bind` for a property. A value that does not decode (a file
    /// edited by another program) is a `.corrupt` error, never a trap.
    static func read(_ s: Statement, _ col: Int32, _ p: Property) throws -> FerryValue {
        if s.isNull(col) { return p.isList ? .list([]) : .null }
        if p.isList {
            let v = try ValueCodec.decode(s.blob(col))
            guard case .list = v else { throw FerryError(.corrupt, "list column '\(p.name)' holds a non-list") }
            return v
        }
        switch p.valueType {
        case .bool: return .bool(s.int64(col) != 0)
        case .int: return .int(s.int64(col))
        case .double:
            if s.columnType(col) == 4 /* SQLITE_BLOB */ {
                let b = s.blob(col)
                guard b.count == 8 else { throw FerryError(.corrupt, "double column '\(p.name)' holds a blob") }
                return .double(Double(bitPattern: b.reduce(0) { $0 << 8 | UInt64($1) }))
            }
            return .double(s.double(col))
        case .string: return .string(s.string(col))
        case .binary: return .binary(s.blob(col))
        case .timestamp:
            let b = s.blob(col)
            guard b.count == 12 else { throw FerryError(.corrupt, "timestamp column '\(p.name)' holds \(b.count) bytes") }
            let sec = b[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } ^ (1 << 63)
            let ns = b[8..<12].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard ns < 1_000_000_000 else { throw FerryError(.corrupt, "timestamp column '\(p.name)' holds bad nanoseconds") }
            return .timestamp(try Timestamp(seconds: Int64(bitPattern: sec), nanoseconds: Int32(ns)))
        case .objectId:
            do { return .objectId(try ObjectId(bytes: s.blob(col))) } catch { throw FerryError(.corrupt, "objectId column '\(p.name)' is damaged") }
        case .uuid:
            do { return .uuid(try FerryUUID(bytes: s.blob(col))) } catch { throw FerryError(.corrupt, "uuid column '\(p.name)' is damaged") }
        case .link: return .null
        }
    }

    /// An SQL literal of a value, for `ALTER TABLE ... DEFAULT`.
    static func sqlLiteral(_ v: FerryValue) -> String {
        func hexBlob(_ b: [UInt8]) -> String {
            let digits = Array("0123456789ABCDEF")
            return "X'" + String(b.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }) + "'"
        }
        switch v {
        case .null: return "NULL"
        case .bool(let b): return b ? "1" : "0"
        case .int(let i): return String(i)
        case .double(let d): return d.isFinite ? "\(d)" : "0"
        case .string(let s): return "'" + s.replacingAll("'", with: "''") + "'"
        case .binary(let b): return hexBlob(b)
        case .timestamp(let t): return hexBlob(timestampBytes(t))
        case .objectId(let o): return hexBlob(o.array)
        case .uuid(let u): return hexBlob(u.array)
        case .list: return hexBlob(ValueCodec.encode(v))
        }
    }
}

extension String {
    /// `replacingOccurrences` without Foundation.
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }

    /// The name quoted as an SQL identifier.
    var sqlIdentifier: String { "\"" + replacingAll("\"", with: "\"\"") + "\"" }
}
