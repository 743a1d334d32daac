#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
import FerrySyncStorage
#endif
import Foundation

/// One row a backend wrote: `old` and `new` are JSON arrays of the columns' texts by
/// property index (`PostgresSQLTables.captureRow`), nil for an insert's old and a delete's new.
public struct CapturedRow: Sendable, Equatable {
    public let id: Int64
    public let table: String
    /// `INSERT`, `UPDATE` or `DELETE`.
    public let operation: String
    public let old: String?
    public let new: String?

    public init(id: Int64, table: String, operation: String, old: String?, new: String?) {
        (self.id, self.table, self.operation, self.old, self.new) = (id, table, operation, old, new)
    }
}

/// One backend transaction's captured SQL writes (`PostgresSQLCapture`) decided into the
/// instructions of one changeset, with no I/O: what the writer changed, not the rows it left
/// as they were. An INSERT creates the object with every column; an UPDATE sets the columns
/// whose value changed (a list replaced whole: cleared, then each element inserted), or, when
/// it changed the primary key, erases the old object and creates the new one; a DELETE erases.
///
/// The values arrive as `captureText` makes them (a timestamp in microseconds, binary in hex,
/// the rest as PostgreSQL prints it). A value Ferry cannot hold (`infinity`, an ObjectId
/// that is not 24 hex digits in a list) refuses the whole transaction with its reason.
public enum SQLWriteDecoding {
    public struct Refusal: Error, Equatable {
        public let message: String
        init(_ message: String) { self.message = message }
    }

    public struct Decoded: Equatable, Sendable {
        public var instructions: [Instruction] = []
        /// Every object the rows touched, each once, in the order first touched.
        public var keys: [ObjectKey] = []
    }

    /// One column as `captureRow` makes it: a value's text, null, or a list's element texts.
    enum Column: Equatable {
        case text(String)
        case null
        case list([String?])

        /// A column as the capture trigger wrote it: null, a text, or a list of texts and nulls
        /// (nil: anything else).
        init?(_ json: JSON) {
            switch json {
            case .null: self = .null
            case .string(let s): self = .text(s)
            case .array(let items):
                var list: [String?] = []
                for i in items {
                    switch i {
                    case .null: list.append(nil)
                    case .string(let s): list.append(s)
                    default: return nil
                    }
                }
                self = .list(list)
            default: return nil
            }
        }
    }

    /// The instructions of `rows` (one transaction's, in the order written).
    public static func decode(_ rows: [CapturedRow], schema: Schema) throws -> Decoded {
        var out = Decoded()
        var seen: Set<ObjectKey> = []
        func touch(_ key: ObjectKey) { if seen.insert(key).inserted { out.keys.append(key) } }
        for row in rows {
            guard let os = schema.objectSchema(named: row.table) else { throw Refusal("table \(row.table): no such class in the app's schema") }
            do {
                switch row.operation {
                case "INSERT":
                    let new = try values(row.new, of: os)
                    let key = new[os.primaryKeyIndex]
                    touch(ObjectKey(table: os.name, key: key))
                    out.instructions.append(create(os, new))
                case "UPDATE":
                    let old = try columns(row.old, of: os), new = try columns(row.new, of: os)
                    let oldKey = try value(old[os.primaryKeyIndex], of: os.properties[os.primaryKeyIndex])
                    let newValues = try values(row.new, of: os)
                    let newKey = newValues[os.primaryKeyIndex]
                    touch(ObjectKey(table: os.name, key: oldKey))
                    if oldKey != newKey {
                        touch(ObjectKey(table: os.name, key: newKey))
                        out.instructions.append(.erase(table: os.name, key: oldKey))
                        out.instructions.append(create(os, newValues))
                        continue
                    }
                    for (i, p) in os.properties.enumerated() where i != os.primaryKeyIndex && old[i] != new[i] {
                        if p.isList, case .list(let items) = newValues[i] {
                            out.instructions.append(.listClear(table: os.name, key: newKey, field: p.name))
                            for (n, item) in items.enumerated() {
                                out.instructions.append(.listInsert(table: os.name, key: newKey, field: p.name, index: n, value: item))
                            }
                        } else {
                            out.instructions.append(.set(table: os.name, key: newKey, field: p.name, value: newValues[i]))
                        }
                    }
                case "DELETE":
                    let old = try columns(row.old, of: os)
                    let key = try value(old[os.primaryKeyIndex], of: os.properties[os.primaryKeyIndex])
                    touch(ObjectKey(table: os.name, key: key))
                    out.instructions.append(.erase(table: os.name, key: key))
                default:
                    throw Refusal("unknown operation \(row.operation)")
                }
            } catch let r as Refusal {
                throw Refusal("\(row.operation) on \(os.name): \(r.message)")
            }
        }
        return out
    }

    /// The objects `rows` touched whose keys can be read, for restoring the tables' rows when
    /// the transaction is refused (a row whose key cannot be read is left out).
    public static func keys(_ rows: [CapturedRow], schema: Schema) -> [ObjectKey] {
        var keys: [ObjectKey] = [], seen: Set<ObjectKey> = []
        for row in rows {
            guard let os = schema.objectSchema(named: row.table) else { continue }
            for json in [row.old, row.new] {
                // A key that cannot be read names no row Ferry holds: nothing to put back.
                guard let cols = try? columns(json, of: os), let key = try? value(cols[os.primaryKeyIndex], of: os.properties[os.primaryKeyIndex]) else { continue }
                let k = ObjectKey(table: os.name, key: key)
                if seen.insert(k).inserted { keys.append(k) }
            }
        }
        return keys
    }

    private static func create(_ os: ObjectSchema, _ values: [FerryValue]) -> Instruction {
        var fields: [FieldValue] = []
        for (i, p) in os.properties.enumerated() where i != os.primaryKeyIndex { fields.append(FieldValue(name: p.name, value: values[i])) }
        return .create(table: os.name, key: values[os.primaryKeyIndex], fields: fields)
    }

    /// A row's JSON array of column texts, one per property.
    static func columns(_ json: String?, of os: ObjectSchema) throws -> [Column] {
        guard let json else { throw Refusal("the captured row has no values") }
        // Any parse error is this one refusal, which says what was wrong.
        guard case .array(let items)? = try? JSON.parse(Array(json.utf8)), items.count == os.properties.count else {
            throw Refusal("the captured row does not match the class's \(os.properties.count) properties (was the table changed outside Ferry?)")
        }
        var columns: [Column] = []
        for i in items {
            guard let c = Column(i) else { throw Refusal("a captured column is neither text, null nor a list of texts (was the table changed outside Ferry?)") }
            columns.append(c)
        }
        return columns
    }

    static func values(_ json: String?, of os: ObjectSchema) throws -> [FerryValue] {
        let cols = try columns(json, of: os)
        return try os.properties.enumerated().map { try value(cols[$0], of: $1) }
    }

    /// One column's value as Ferry holds it.
    static func value(_ column: Column, of p: Property) throws -> FerryValue {
        do {
            switch (column, p.isList) {
            case (.null, true): return .list([])
            case (.list(let items), true): return .list(try items.map { try scalar($0, p.valueType) })
            case (.text(let text), false): return try scalar(text, p.valueType)
            case (.null, false): return .null
            default: throw Refusal(p.isList ? "not a list" : "a list where a value was expected")
            }
        } catch let r as Refusal {
            throw Refusal("column \(p.name): \(r.message)")
        }
    }

    /// Each `try?` here turns a value type's own error into the refusal that names the
    /// column and shows the text.
    static func scalar(_ text: String?, _ type: PropertyType) throws -> FerryValue {
        guard let text else { return .null }
        let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
        switch type {
        case .bool:
            switch text {
            case "true": return .bool(true)
            case "false": return .bool(false)
            default: throw Refusal("'\(shown)' is not a boolean")
            }
        case .int:
            guard let i = Int64(text) else { throw Refusal("'\(shown)' is not a 64-bit integer") }
            return .int(i)
        case .double:
            guard let d = Double(text) else { throw Refusal("'\(shown)' is not a number") }
            return .double(d)
        case .string:
            return .string(text)
        case .objectId, .link:
            // The parse error is replaced by a refusal that quotes the value (below, likewise).
            guard let o = try? ObjectId(hex: text), o.description == text else { throw Refusal("'\(shown)' is not an ObjectId (24 lowercase hex digits)") }
            return .objectId(o)
        case .uuid:
            guard let u = try? FerryUUID(string: text) else { throw Refusal("'\(shown)' is not a UUID") }
            return .uuid(u)
        case .binary:
            guard let bytes = hexBytes(text) else { throw Refusal("binary data did not arrive as hex") }
            return .binary(bytes)
        case .timestamp:
            guard let micros = Int64(text) else { throw Refusal("the timestamp \(shown) is outside what Ferry holds (its microseconds must fit in 64 bits)") }
            let (seconds, rest) = (micros >= 0 || micros % 1_000_000 == 0) ? (micros / 1_000_000, micros % 1_000_000) : (micros / 1_000_000 - 1, micros % 1_000_000 + 1_000_000)
            // As above: the range error becomes a refusal that quotes the value.
        guard let t = try? Timestamp(seconds: seconds, nanoseconds: Int32(rest * 1000)) else { throw Refusal("the timestamp \(shown) is outside what Ferry holds") }
            return .timestamp(t)
        }
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x61...0x66: return c - 0x61 + 10
            case 0x41...0x46: return c - 0x41 + 10
            default: return nil
            }
        }
        var i = 0
        while i < digits.count {
            guard let hi = nibble(digits[i]), let lo = nibble(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
