import FerryCore
@testable import FerryPostgresStorage
import FerrySyncStorage
import Foundation
import PostgresNIO
import Testing

/// A backend's SQL writes captured by the SQL tables' triggers (issue 24): every value type
/// comes back from the capture exactly as Ferry holds it (an UPDATE of one column is that one
/// set and nothing else), Ferry's own writes are not captured, and a captured transaction is
/// taken out of the inbox once, with its rows put back as the store has them.
@Suite("Storage: PostgreSQL's capture of SQL writes", .enabled(if: PostgresTestDatabase.url != nil))
struct PostgresSQLCaptureTests {
    static func sql(_ c: PostgresConnection, _ text: String) async throws {
        try await c.query(PostgresQuery(unsafeSQL: text), logger: PostgresTestDatabase.logger)
    }

    static func captured(_ storage: PostgresSyncStorage) async throws -> [(CapturedTransaction, [CapturedRow])] {
        var out: [(CapturedTransaction, [CapturedRow])] = []
        for t in try await storage.capturedTransactions(limit: 100) { out.append((t, try await storage.capturedRows(of: t.id, after: 0, limit: 1000))) }
        return out
    }

    @Test func everyTypeComesBackAsFerryHoldsItAndFerrysOwnWritesAreNotCaptured() async throws {
        let url = try #require(PostgresTestDatabase.url)
        try await PostgresTestDatabase.withEmptyDatabase(url: url) { place in
            let store = try await place.open()
            defer { Task { await store.close() } }
            let storage = try #require(store.storage as? PostgresSyncStorage)
            let schema = try PostgresSQLTablesTests.schema()
            let every = try #require(schema.objectSchema(named: "Every"))
            _ = try await storage.prepareSQLTables(try PostgresSQLTables(schema: schema), rebuild: false)
            let file = try await storage.newClientFile(userId: "u")

            let id = try ObjectId(hex: "65a000000000000000000002")
            let key = ObjectKey(table: "Every", key: .objectId(id))
            let values: [String: FerryValue] = [
                "_id": .objectId(id), "flag": .bool(true), "i": .int(Int64.min), "d": .double(0.1), "s": .string("a \"quote\"\nand é"),
                "b": .binary([0, 255, 16]), "t": .timestamp(try Timestamp(seconds: -1, nanoseconds: 500_001_000)),
                "u": .uuid(try FerryUUID(string: "3b241101-e2bb-4255-8caf-4136c566a962")),
                "other": .string("o1"), "ints": .list([.int(1), .int(-2), .int(Int64.max)]), "names": .list([.string("x"), .string("y, \"z\"")]),
            ]
            try await storage.commit([key: StoredObject(object: PostgresSQLTablesTests.object(every, values))], clientFile: file.ident)
            #expect(try await Self.captured(storage).isEmpty, "Ferry's own write was captured")

            let backend = try await PostgresTestDatabase.connect(url)
            defer { Task { try? await backend.close() } }
            // One column changed: one set, though every column went through the capture.
            try await Self.sql(backend, #"UPDATE ferry_data."Every" SET s = 'changed' WHERE "_id" = '65a000000000000000000002'"#)
            // A copy under a new key: its create holds every value exactly.
            try await Self.sql(backend, """
                INSERT INTO ferry_data."Every" SELECT '65a000000000000000000003', flag, i, d, s, b, t, u, other, ints, names
                FROM ferry_data."Every" WHERE "_id" = '65a000000000000000000002'
                """)
            let captured = try await Self.captured(storage)
            #expect(captured.map { $0.1.map(\.operation) } == [["UPDATE"], ["INSERT"]])
            let update = try SQLWriteDecoding.decode(captured[0].1, schema: schema)
            #expect(update.instructions == [.set(table: "Every", key: .objectId(id), field: "s", value: .string("changed"))])
            #expect(update.keys == [key])
            let copy = try SQLWriteDecoding.decode(captured[1].1, schema: schema)
            let copyId = FerryValue.objectId(try ObjectId(hex: "65a000000000000000000003"))
            var expected = values
            expected["s"] = .string("changed")
            #expect(copy.instructions == [.create(table: "Every", key: copyId, fields: every.properties.filter { !$0.isPrimaryKey }.map {
                FieldValue(name: $0.name, value: expected[$0.name]!)
            })])

            // Taken once: the second try finds nothing. The row is put back as the store has it.
            let t = captured[0].0
            #expect(try await storage.writeTransaction { tx in try await tx.consumeCapturedWrites(transaction: t.id, restoring: [key]) })
            #expect(try await !storage.writeTransaction { tx in try await tx.consumeCapturedWrites(transaction: t.id, restoring: [key]) })
            let rows = try await backend.query(#"SELECT s FROM ferry_data."Every" WHERE "_id" = '65a000000000000000000002'"#, logger: PostgresTestDatabase.logger)
            var s: [String] = []
            for try await v in rows.decode(String.self) { s.append(v) }
            #expect(s == ["a \"quote\"\nand é"])
            // The put-back row is Ferry's write: not captured again.
            #expect(try await Self.captured(storage).map(\.0.id) == [captured[1].0.id])
        }
    }

    @Test func decodingRefusesWhatFerryCannotHold() throws {
        let schema = try PostgresSQLTablesTests.schema()
        func row(_ t: String, _ list: String = #"["1"]"#) -> CapturedRow {
            CapturedRow(id: 1, table: "Every", operation: "INSERT", old: nil,
                        new: #"["65a000000000000000000009", "true", "1", "1.5", "s", "00", "\#(t)", null, null, \#(list), []]"#)
        }
        #expect(throws: SQLWriteDecoding.Refusal.self) { try SQLWriteDecoding.decode([row("infinity")], schema: schema) }
        #expect(throws: SQLWriteDecoding.Refusal.self) { try SQLWriteDecoding.decode([row("0", #"["x"]"#)], schema: schema) }
        #expect(throws: SQLWriteDecoding.Refusal.self) {
            try SQLWriteDecoding.decode([CapturedRow(id: 1, table: "Gone", operation: "DELETE", old: "[]", new: nil)], schema: schema)
        }
        #expect(throws: SQLWriteDecoding.Refusal.self) {
            try SQLWriteDecoding.decode([CapturedRow(id: 1, table: "Every", operation: "INSERT", old: nil, new: #"["only one column"]"#)], schema: schema)
        }
        // A refused transaction's keys are still found, to put its rows back.
        #expect(SQLWriteDecoding.keys([row("infinity")], schema: schema) == [ObjectKey(table: "Every", key: .objectId(try ObjectId(hex: "65a000000000000000000009")))])
        // Microseconds before the epoch are floored: -1.5 s is -2 s + 0.5 s.
        let decoded = try SQLWriteDecoding.decode([row("-1500000")], schema: schema)
        guard case .create(_, _, let fields) = decoded.instructions.first else { Issue.record("no create"); return }
        #expect(fields.first { $0.name == "t" }?.value == .timestamp(try Timestamp(seconds: -2, nanoseconds: 500_000_000)))
    }
}
