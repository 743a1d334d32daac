import FerryCore
@testable import FerryPostgresStorage
import FerrySyncStorage
import Foundation
import PostgresNIO
import Testing

/// The app's classes as plain PostgreSQL tables (issue 24): created with a column of the
/// natural type per property, written in each upload's transaction (upserts and deletes),
/// migrated when the schema gains a property, refused when a column's type changed, rebuilt
/// from `objects`. Read back over a connection of the test's own, as a backend would.
@Suite("Storage: PostgreSQL's SQL tables", .enabled(if: PostgresTestDatabase.url != nil))
struct PostgresSQLTablesTests {
    static func schema(extra: Bool = false, intAsString: Bool = false) throws -> Schema {
        let every = [
            Property(name: "_id", type: .objectId, isPrimaryKey: true),
            Property(name: "flag", type: .bool),
            Property(name: "i", type: intAsString ? .string : .int, isIndexed: true),
            Property(name: "d", type: .double),
            Property(name: "s", type: .string),
            Property(name: "b", type: .binary),
            Property(name: "t", type: .timestamp),
            Property(name: "u", type: .uuid, isOptional: true),
            Property(name: "other", type: .link, linkTarget: "Other"),
            Property(name: "ints", type: .int, isList: true),
            Property(name: "names", type: .string, isList: true),
        ]
        // The store decodes an object by its schema's properties (positionally), so a class
        // with stored objects cannot gain one yet: the additive change is on the empty class.
        var other = [Property(name: "_id", type: .string, isPrimaryKey: true)]
        if extra { other.append(Property(name: "added", type: .string, isOptional: true)) }
        return try Schema([ObjectSchema(name: "Every", properties: every), ObjectSchema(name: "Other", properties: other)])
    }

    static func object(_ os: ObjectSchema, _ values: [String: FerryValue]) -> StampedObject {
        var v = os.properties.map(\.defaultValue)
        for (name, value) in values { v[os.propertyIndex(named: name)!] = value }
        return StampedObject(values: v, stamps: v.map { _ in Stamp(timestamp: 1, fileIdent: 1) }, versions: v.map { _ in 1 })
    }

    /// Every column of one row as PostgreSQL prints it (time zone UTC), by column name.
    static func row(_ c: PostgresConnection, _ table: String, id: String) async throws -> [String: String?] {
        var out: [String: String?] = [:]
        let names = ["_id", "flag", "i", "d", "s", "b", "t", "u", "other", "ints", "names"]
        for name in names {
            let rows = try await c.query(PostgresQuery(unsafeSQL: "SELECT \"\(name)\"::text FROM ferry_data.\"\(table)\" WHERE \"_id\" = $1",
                                                       binds: { var b = PostgresBindings(); b.append(id); return b }()), logger: PostgresTestDatabase.logger)
            for try await r in rows { out[name] = try r.decode(String?.self) }
        }
        return out
    }

    static func count(_ c: PostgresConnection, _ table: String) async throws -> Int {
        let rows = try await c.query(PostgresQuery(unsafeSQL: "SELECT count(*)::bigint FROM ferry_data.\"\(table)\""), logger: PostgresTestDatabase.logger)
        for try await r in rows { return Int(try r.decode(Int64.self)) }
        return -1
    }

    @Test func tablesShowWhatDevicesConvergeToAndFollowTheSchema() async throws {
        let url = try #require(PostgresTestDatabase.url)
        try await PostgresTestDatabase.withEmptyDatabase(url: url) { place in
            let store = try await place.open()
            defer { Task { await store.close() } }
            let storage = try #require(store.storage as? PostgresSyncStorage)
            let schema = try Self.schema()
            let every = try #require(schema.objectSchema(named: "Every"))
            let file = try await storage.newClientFile(userId: "u")

            // Objects written before the tables exist: the first preparation fills them.
            let early = try ObjectId(hex: "65a000000000000000000001")
            try await storage.commit([ObjectKey(table: "Every", key: .objectId(early)): StoredObject(object: Self.object(every, ["_id": .objectId(early), "i": .int(7)]))],
                                     clientFile: file.ident)
            let tables = try PostgresSQLTables(schema: schema)
            #expect(try await storage.prepareSQLTables(tables, rebuild: false) == ["Every": .created(rows: 1), "Other": .created(rows: 0)])

            let reader = try await PostgresTestDatabase.connect(url)
            defer { Task { try? await reader.close() } }
            try await reader.query("SET TIME ZONE 'UTC'", logger: PostgresTestDatabase.logger)
            var types: [String: String] = [:]
            for try await (column, type) in try await reader.query("""
                SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ferry_data' AND c.relname = 'Every' AND a.attnum > 0
                """, logger: PostgresTestDatabase.logger).decode((String, String).self) { types[column] = type }
            #expect(types == ["_id": "text", "flag": "boolean", "i": "bigint", "d": "double precision", "s": "text", "b": "bytea",
                              "t": "timestamp with time zone", "u": "uuid", "other": "text", "ints": "bigint[]", "names": "text[]"])
            #expect(try await Self.row(reader, "Every", id: early.description)["i"] == "7")

            // Written in the upload's transaction: every type, the edges of each.
            let id = try ObjectId(hex: "65a000000000000000000002")
            let key = ObjectKey(table: "Every", key: .objectId(id))
            let uuid = try FerryUUID(string: "3b241101-e2bb-4255-8caf-4136c566a962")
            let values: [String: FerryValue] = [
                "_id": .objectId(id), "flag": .bool(true), "i": .int(Int64.min), "d": .double(.nan), "s": .string("a \"quote\"\nand\u{0}NUL é"),
                "b": .binary([0, 255, 16]), "t": .timestamp(try Timestamp(seconds: 1_764_410_400, nanoseconds: 123_456_789)), "u": .uuid(uuid),
                "other": .string("o1"), "ints": .list([.int(1), .int(-2), .int(Int64.max)]), "names": .list([.string("x"), .string("y z")]),
            ]
            try await storage.commit([key: StoredObject(object: Self.object(every, values))], clientFile: file.ident)
            let row = try await Self.row(reader, "Every", id: id.description)
            #expect(row == ["_id": id.description, "flag": "true", "i": "-9223372036854775808", "d": "NaN", "s": "a \"quote\"\nand\u{FFFD}NUL é",
                            "b": "\\x00ff10", "t": "2025-11-29 10:00:00.123456+00", "u": uuid.description, "other": "o1",
                            "ints": "{1,-2,9223372036854775807}", "names": "{x,\"y z\"}"])

            // A timestamp PostgreSQL cannot hold, an optional left empty, a changed value.
            var changed = values
            changed["t"] = .timestamp(try Timestamp(seconds: Int64.max, nanoseconds: 0))
            changed["u"] = .null
            changed["d"] = .double(-1.5)
            try await storage.commit([key: StoredObject(object: Self.object(every, changed))], clientFile: file.ident)
            let after = try await Self.row(reader, "Every", id: id.description)
            #expect(after["t"] == "infinity" && after["u"] == .some(nil) && after["d"] == "-1.5")
            // The last seconds whose microseconds would not fit in an Int64: infinity too, not
            // a trap (PostgreSQL's own range would go on to 294276).
            for seconds: Int64 in [Int64.max / 1_000_000, Int64.max / 1_000_000 - 1] {
                changed["t"] = .timestamp(try Timestamp(seconds: seconds, nanoseconds: 999_999_999))
                try await storage.commit([key: StoredObject(object: Self.object(every, changed))], clientFile: file.ident)
                let last = try await Self.row(reader, "Every", id: id.description)["t"]
                #expect(seconds == Int64.max / 1_000_000 ? last == "infinity" : last != "infinity", "\(seconds): \(String(describing: last))")
            }

            // An erase deletes the row.
            try await storage.commit([key: StoredObject(object: nil, erasedState: Self.object(every, changed))], clientFile: file.ident)
            #expect(try await Self.count(reader, "Every") == 1)

            // The schema gains a property: a column is added (nullable), the rows stay.
            let otherKey = ObjectKey(table: "Other", key: .string("o1"))
            let other = try #require(schema.objectSchema(named: "Other"))
            try await storage.commit([otherKey: StoredObject(object: Self.object(other, ["_id": .string("o1")]))], clientFile: file.ident)
            try await storage.commit([otherKey: StoredObject(object: nil, erasedState: Self.object(other, ["_id": .string("o1")]))], clientFile: file.ident)
            let grown = try PostgresSQLTables(schema: try Self.schema(extra: true))
            #expect(try await storage.prepareSQLTables(grown, rebuild: false) == ["Every": .unchanged, "Other": .columnsAdded(["added"], rows: 0)])
            #expect(try await Self.count(reader, "Every") == 1)
            // A property whose type changed: refused, with what to do.
            await #expect(throws: FerryError.self) { try await storage.prepareSQLTables(try PostgresSQLTables(schema: try Self.schema(intAsString: true)), rebuild: false) }

            // Rows changed behind Ferry's back come back with a rebuild.
            try await reader.query("DELETE FROM ferry_data.\"Every\"", logger: PostgresTestDatabase.logger)
            #expect(try await storage.prepareSQLTables(grown, rebuild: true) == ["Every": .rebuilt(rows: 1), "Other": .rebuilt(rows: 0)])
            #expect(try await Self.row(reader, "Every", id: early.description)["i"] == "7")
        }
    }

    @Test func aSchemaNameMustBePlain() throws {
        #expect(throws: FerryError.self) { try PostgresSQLTables(schema: try Self.schema(), schemaName: "Bad-Name") }
        #expect(throws: FerryError.self) { try PostgresSQLTables(schema: try Self.schema(), schemaName: "x\"; DROP TABLE objects; --") }
        #expect(throws: Never.self) { try PostgresSQLTables(schema: try Self.schema(), schemaName: "backend_data") }
    }
}
