import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import PostgresNIO

/// The app's classes as ordinary PostgreSQL tables (issue 24; docs/backend.md, "The data in
/// SQL tables"): one table per class in a schema of its own (`ferry_data` by default), one
/// column per property with its natural type, the primary key as the table's, an index on
/// each indexed or queryable property. Written in the same transaction that makes each upload
/// durable (`PostgresWriteTransaction.finish`): what a table shows is what devices converge
/// to. `objects` stays the source of truth; a table can be rebuilt from it at any time.
///
/// Column types (`sqlType`): objectId as `text` (24 lowercase hex digits: readable, and joins
/// and literals in SQL are plain strings), uuid as `uuid`, int as `bigint`, double as `double
/// precision`, bool as `boolean`, string as `text`, timestamp as `timestamptz`, binary as
/// `bytea`, a link as its target's primary key, a list as an array of its element type.
/// Where PostgreSQL cannot hold a value exactly, the table shows the nearest it can (the
/// Data API has the exact one): a timestamp's nanoseconds are cut to microseconds (toward the
/// past), a timestamp outside PostgreSQL's range (4713 BC to 294276 AD) is `-infinity` or
/// `infinity`, and a NUL character in a string (PostgreSQL's text cannot hold one) is U+FFFD.
public final class PostgresSQLTables: Sendable {
    /// The schema the tables are in.
    public let schemaName: String
    let tables: [String: Table]
    /// The app's schema the tables follow.
    let schema: Schema

    struct Column: Sendable {
        let property: Property
        /// The property's index in the object schema's properties.
        let index: Int
        let quotedName: String
        /// The column's type in SQL (`text`, `bigint[]`, ...) and as `pg_type.typname` says
        /// it (`text`, `_int8`, ...).
        let sqlType: String
        let typeName: String
        let notNull: Bool
        /// What PostgreSQL checks beyond the type (an ObjectId's 24 lowercase hex digits), so
        /// that a backend's SQL write Ferry could not hold is refused by the write itself.
        let check: String?
        /// The column as CREATE TABLE declares it (ADD COLUMN leaves out NOT NULL).
        var definition: String { "\(quotedName) \(sqlType)\(notNull ? " NOT NULL" : "")\(check.map { " CHECK (\($0))" } ?? "")" }
        /// The SQL expression that reads this column's value from `r`, one element of the
        /// JSON array a write sends.
        let fromJSON: String
    }

    struct Table: Sendable {
        let objectSchema: ObjectSchema
        let name: String
        let qualified: String
        let columns: [Column]
        let primaryKey: Column
        let indexed: [Column]
        let upsert: String
        let delete: String
    }

    /// `indexed`: per class, the properties to index besides those the schema marks indexed
    /// (the app's queryable fields).
    public init(schema: Schema, schemaName: String = "ferry_data", indexed: [String: Set<String>] = [:]) throws {
        guard Self.isPlainIdentifier(schemaName) else {
            throw FerryError(.invalidArgument, "the SQL tables' schema name '\(schemaName)' must be 1 to 63 lowercase letters, digits or '_', not starting with a digit")
        }
        self.schemaName = schemaName
        self.schema = schema
        var tables: [String: Table] = [:]
        for os in schema.classes {
            let columns = os.properties.enumerated().map { Self.column($1, index: $0) }
            let pk = columns[os.primaryKeyIndex]
            let extra = indexed[os.name] ?? []
            let indexedColumns = columns.filter { !$0.property.isPrimaryKey && ($0.property.isIndexed || extra.contains($0.property.name)) }
            let qualified = Self.quote(schemaName) + "." + Self.quote(os.name)
            let names = columns.map(\.quotedName).joined(separator: ", ")
            let values = columns.map(\.fromJSON).joined(separator: ", ")
            let others = columns.filter { !$0.property.isPrimaryKey }
            let onConflict = others.isEmpty ? "DO NOTHING" : "DO UPDATE SET " + others.map { "\($0.quotedName) = excluded.\($0.quotedName)" }.joined(separator: ", ")
            let upsert = "INSERT INTO \(qualified) (\(names)) SELECT \(values) FROM jsonb_array_elements($1::jsonb) AS r ON CONFLICT (\(pk.quotedName)) \(onConflict)"
            let delete = "DELETE FROM \(qualified) WHERE \(pk.quotedName) IN (SELECT \(pk.fromJSON) FROM jsonb_array_elements($1::jsonb) AS r)"
            tables[os.name] = Table(objectSchema: os, name: os.name, qualified: qualified, columns: columns, primaryKey: pk, indexed: indexedColumns,
                                    upsert: upsert, delete: delete)
        }
        self.tables = tables
    }

    // MARK: names and types

    /// A name PostgreSQL takes unquoted and unchanged.
    static func isPlainIdentifier(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...63).contains(bytes.count), !(0x30...0x39).contains(bytes[0]) else { return false }
        return bytes.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5f }
    }

    /// A quoted identifier: any name, as it is (a `"` doubled). Names longer than PostgreSQL's
    /// 63 bytes are refused by the schema's own limits before they get here.
    static func quote(_ name: String) -> String { "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }

    static func scalarType(_ t: PropertyType) -> (sql: String, name: String) {
        switch t {
        case .bool: return ("boolean", "bool")
        case .int: return ("bigint", "int8")
        case .double: return ("double precision", "float8")
        case .string, .objectId: return ("text", "text")
        case .binary: return ("bytea", "bytea")
        case .timestamp: return ("timestamptz", "timestamptz")
        case .uuid: return ("uuid", "uuid")
        case .link: return ("text", "text")   // not reached: a link's value type is its target key's
        }
    }

    /// SQL converting `x` (a text expression: the JSON value's text) to the column's type.
    static func convert(_ x: String, _ t: PropertyType) -> String {
        switch t {
        case .bool: return "(\(x))::boolean"
        case .int: return "(\(x))::bigint"
        case .double: return "(\(x))::double precision"
        case .string, .objectId, .link: return x
        case .binary: return "decode(\(x), 'hex')"
        case .uuid: return "(\(x))::uuid"
        case .timestamp:
            // Microseconds since the epoch, or 'infinity' / '-infinity'.
            return "(CASE WHEN \(x) IN ('infinity', '-infinity') THEN (\(x))::timestamptz ELSE timestamptz 'epoch' + (\(x))::double precision * interval '1 microsecond' END)"
        }
    }

    static func column(_ p: Property, index: Int) -> Column {
        let (sql, name) = scalarType(p.valueType)
        let key = "r->>'\(index)'"
        let fromJSON = p.isList
            ? "ARRAY(SELECT \(convert("e", p.valueType)) FROM jsonb_array_elements_text(r->'\(index)') WITH ORDINALITY AS a(e, n) ORDER BY n)::\(sql)[]"
            : convert(key, p.valueType)
        // A required scalar is never null; a list is never null (empty at most); links are optional.
        let notNull = p.isPrimaryKey || p.isList || (!p.isOptional && p.type != .link)
        var check: String?
        if p.valueType == .objectId {
            // Lowercase hex digits, 24 per value: translate() costs an insert about nothing,
            // where a regular expression cost it a quarter (100,000 rows: 0.38 s against 0.48-0.55).
            let c = quote(p.name), digits = "'0123456789abcdef'"
            check = p.isList
                ? "octet_length(array_to_string(\(c), '')) = 24 * coalesce(array_length(array_remove(\(c), NULL), 1), 0) AND translate(array_to_string(\(c), ''), \(digits), '') = ''"
                : "octet_length(\(c)) = 24 AND translate(\(c), \(digits), '') = ''"
        }
        return Column(property: p, index: index, quotedName: quote(p.name), sqlType: p.isList ? sql + "[]" : sql,
                      typeName: p.isList ? "_" + name : name, notNull: notNull, check: check, fromJSON: fromJSON)
    }

    // MARK: values

    /// The timestamps a table holds as they are, in seconds since the epoch: from PostgreSQL's
    /// first (4713-11-24 BC 00:00 UTC) to the last whose microseconds fit in an Int64 (in
    /// 294247 AD, a little before PostgreSQL's own end in 294276): `appendValue` multiplies
    /// by a million, and a device's timestamp past that would otherwise overflow.
    static let timestampRange: ClosedRange<Int64> = -210_866_803_200...(Int64.max / 1_000_000 - 1)

    /// One value as the JSON a write sends (see `convert` for how SQL reads it back).
    static func appendValue(_ v: FerryValue, to out: inout [UInt8]) {
        switch v {
        case .null: out += Array("null".utf8)
        case .bool(let b): out += Array((b ? "true" : "false").utf8)
        case .int(let i): out += Array(String(i).utf8)
        case .double(let d):
            if d.isFinite { out += Array("\(d)".utf8) } else { out += Array((d.isNaN ? #""NaN""# : d > 0 ? #""Infinity""# : #""-Infinity""#).utf8) }
        case .string(let s):
            JSONText.appendQuoted(s.utf8.contains(0) ? s.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : s, to: &out)
        case .binary(let bytes):
            out.append(UInt8(ascii: "\""))
            let digits = Array("0123456789abcdef".utf8)
            for b in bytes {
                out.append(digits[Int(b >> 4)])
                out.append(digits[Int(b & 15)])
            }
            out.append(UInt8(ascii: "\""))
        case .timestamp(let t):
            if t.seconds < timestampRange.lowerBound { out += Array(#""-infinity""#.utf8) } else if t.seconds > timestampRange.upperBound {
                out += Array(#""infinity""#.utf8)
            } else {
                // Cut to microseconds toward the past (nanoseconds are 0...999,999,999).
                let micros = t.seconds * 1_000_000 + Int64(t.nanoseconds / 1000)
                out += Array(String(micros).utf8)
            }
        case .objectId(let o): JSONText.appendQuoted(o.description, to: &out)
        case .uuid(let u): JSONText.appendQuoted(u.description, to: &out)
        case .list(let items):
            out.append(UInt8(ascii: "["))
            for (n, item) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                appendValue(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
    }

    /// A JSON array of rows (objects keyed by property index) for `upsert`.
    static func rows(_ objects: some Sequence<[FerryValue]>) -> String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        var first = true
        for values in objects {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out.append(UInt8(ascii: "{"))
            for (i, v) in values.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out += Array("\"\(i)\":".utf8)
                appendValue(v, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// A JSON array of primary keys (as rows of the key alone) for `delete`.
    static func keys(_ keys: some Sequence<FerryValue>, primaryKeyIndex: Int) -> String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        var first = true
        for k in keys {
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            out += Array("{\"\(primaryKeyIndex)\":".utf8)
            appendValue(k, to: &out)
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: writing

    /// Rows per statement.
    static let batch = 1_000

    static func run(_ sql: String, json: String, _ connection: PostgresConnection, logger: Logger, _ what: String) async throws {
        var binds = PostgresBindings()
        binds.append(json)
        _ = try await PostgresFailure.run(what) { try await connection.guardedQuery(PostgresQuery(unsafeSQL: sql, binds: binds), logger: logger) }
    }

    /// Writes the transaction's objects to their tables: live objects upserted, erased ones
    /// deleted. Objects of a class without a table (not in the schema) are left alone. Like
    /// the objects' flush, each statement is encoded while PostgreSQL runs the one before it
    /// (at most two outstanding; the rows of different statements never share a key).
    func write(_ objects: [ObjectKey: StoredObject], _ connection: PostgresConnection, logger: Logger) async throws {
        // Ferry's own writes: the capture triggers skip them (`PostgresSQLCapture`).
        try await connection.guardedQuery(PostgresQuery(unsafeSQL: Self.markOrigin), logger: logger)
        var live: [String: [[FerryValue]]] = [:], erased: [String: [FerryValue]] = [:]
        for (key, stored) in objects where tables[key.table] != nil {
            if let o = stored.object { live[key.table, default: []].append(o.values) } else { erased[key.table, default: []].append(key.key) }
        }
        var statements: [(sql: String, make: () -> String, what: String)] = []
        for (name, rows) in live {
            let t = tables[name]!
            for start in stride(from: 0, to: rows.count, by: Self.batch) {
                let batch = rows[start..<min(start + Self.batch, rows.count)]
                statements.append((t.upsert, { Self.rows(batch) }, "writing \(batch.count) rows of \(t.qualified)"))
            }
        }
        for (name, keys) in erased {
            let t = tables[name]!
            for start in stride(from: 0, to: keys.count, by: Self.batch) {
                let batch = keys[start..<min(start + Self.batch, keys.count)]
                statements.append((t.delete, { Self.keys(batch, primaryKeyIndex: t.objectSchema.primaryKeyIndex) }, "deleting \(batch.count) rows of \(t.qualified)"))
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { running in
            var outstanding = 0
            for (sql, make, what) in statements {
                let json = make()
                if outstanding == 2 {
                    try await running.next()
                    outstanding -= 1
                }
                running.addTask { try await Self.run(sql, json: json, connection, logger: logger, what) }
                outstanding += 1
            }
            try await running.waitForAll()
        }
    }

    // MARK: creating and migrating

    /// What `prepare` did to each table, for the log.
    public enum Preparation: Equatable, Sendable {
        case created(rows: Int)
        case columnsAdded([String], rows: Int)
        case unchanged
        case rebuilt(rows: Int)
    }

    /// Creates the schema and every missing table (filled from `objects`), adds the columns of
    /// properties the schema gained (additive changes; the table is then filled again), and
    /// the missing indexes. With `rebuild`, every table is dropped and made again from
    /// `objects`. A column whose type is not the property's stops it: rebuild then. Runs
    /// under the app's write lock (no upload commits meanwhile, on any node).
    func prepare(_ connection: PostgresConnection, rebuild: Bool, logger: Logger) async throws -> [String: Preparation] {
        try await connection.guardedQuery(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(Self.quote(schemaName))"), logger: logger)
        try await connection.guardedQuery(PostgresQuery(unsafeSQL: Self.markOrigin), logger: logger)
        var done: [String: Preparation] = [:]
        for name in tables.keys.sorted() {
            let t = tables[name]!
            var existing: [String: String] = [:]
            let rows = try await connection.guardedQuery("""
                SELECT a.attname, t.typname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                JOIN pg_type t ON t.oid = a.atttypid WHERE n.nspname = \(schemaName) AND c.relname = \(name) AND a.attnum > 0 AND NOT a.attisdropped
                """, logger: logger).collect()
            for row in rows {
                let (column, type) = try PostgresObjectReads.decodeRow(row, (String, String).self, "pg_attribute")
                existing[column] = type
            }
            if rebuild, !existing.isEmpty {
                try await connection.guardedQuery(PostgresQuery(unsafeSQL: "DROP TABLE \(t.qualified)"), logger: logger)
                existing = [:]
            }
            if existing.isEmpty {
                let definitions = t.columns.map(\.definition)
                    + ["PRIMARY KEY (\(t.primaryKey.quotedName))"]
                try await connection.guardedQuery(PostgresQuery(unsafeSQL: "CREATE TABLE \(t.qualified) (\(definitions.joined(separator: ", ")))"), logger: logger)
                try await createIndexes(t, connection, logger: logger)
                let count = try await fill(t, connection, logger: logger)
                done[name] = rebuild ? .rebuilt(rows: count) : .created(rows: count)
                continue
            }
            for c in t.columns {
                if let type = existing[c.property.name], type != c.typeName {
                    throw FerryError(.invalidArgument, "the SQL table \(t.qualified) has column \(c.quotedName) of type \(type), but the schema's property is \(c.sqlType): rebuild the tables (ferry-server --rebuild-sql-tables)")
                }
            }
            let missing = t.columns.filter { existing[$0.property.name] == nil }
            try await createIndexes(t, connection, logger: logger)
            if missing.isEmpty {
                done[name] = .unchanged
                continue
            }
            // New columns are nullable (existing rows have no value until the fill below).
            for c in missing {
                try await connection.guardedQuery(PostgresQuery(unsafeSQL: "ALTER TABLE \(t.qualified) ADD COLUMN \(c.quotedName) \(c.sqlType)\(c.check.map { " CHECK (\($0))" } ?? "")"), logger: logger)
            }
            done[name] = .columnsAdded(missing.map(\.property.name), rows: try await fill(t, connection, logger: logger))
        }
        return done
    }

    private func createIndexes(_ t: Table, _ connection: PostgresConnection, logger: Logger) async throws {
        for c in t.indexed {
            // PostgreSQL cuts names at 63 bytes; the table and column make it unique enough.
            let index = Self.quote(String(decoding: Array("\(t.name)_\(c.property.name)_idx".utf8.prefix(63)), as: UTF8.self))
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: "CREATE INDEX IF NOT EXISTS \(index) ON \(t.qualified) (\(c.quotedName))"), logger: logger)
        }
    }

    /// Upserts every live object of the class from `objects`; returns how many.
    private func fill(_ t: Table, _ connection: PostgresConnection, logger: Logger) async throws -> Int {
        var after: [UInt8]?
        var count = 0
        while true {
            let page = try await PostgresObjectReads.objects(connection, schema: t.objectSchema, after: after, limit: Self.batch, logger: logger)
            if page.isEmpty { return count }
            try await Self.run(t.upsert, json: Self.rows(page.map(\.object.values)), connection, logger: logger, "filling \(t.qualified)")
            count += page.count
            after = page.last?.rawKey
            if page.count < Self.batch { return count }
        }
    }
}
