import Testing
@testable import FerryCore

@Suite("Query language: parsing, checking, evaluating")
struct QueryLanguageTests {
    let rows = [
        TestSchemas.row(1, owner: "alice", name: "Apple pie", complexity: 1, score: 2.5, tags: ["food", "sweet"]),
        TestSchemas.row(2, owner: "bob", name: "banana", complexity: 4, tags: ["food"], done: true),
        TestSchemas.row(3, owner: "alice", name: "Cherry", complexity: 7, score: .nan),
        TestSchemas.row(4, owner: "carol", name: "date", complexity: 5, score: 9, tags: ["a", "b", "c"],
                        due: try! Timestamp(seconds: 1_700_000_000, nanoseconds: 5)),
    ]

    func names(_ q: String, _ args: [FerryValue] = []) throws -> [String] {
        let compiled = try CompiledQuery(q, on: TestSchemas.item, arguments: args)
        return compiled.orderAndLimit(rows.filter(compiled.matches), values: { $0 }).map {
            if case .string(let s) = $0[2] { return s } else { return "?" }
        }
    }

    @Test func comparisonsOnIntegers() throws {
        #expect(try names("complexity <= 4") == ["Apple pie", "banana"])
        #expect(try names("complexity > 4") == ["Cherry", "date"])
        #expect(try names("complexity == 5") == ["date"])
        #expect(try names("complexity != 5") == ["Apple pie", "banana", "Cherry"])
        #expect(try names("4 >= complexity") == ["Apple pie", "banana"])
        #expect(try names("complexity < 4.5") == ["Apple pie", "banana"])
    }

    @Test func argumentsAndLogic() throws {
        #expect(try names("ownerId == $0 AND complexity > $1", [.string("alice"), .int(2)]) == ["Cherry"])
        #expect(try names("ownerId == 'bob' OR complexity == 5") == ["banana", "date"])
        #expect(try names("NOT (ownerId == 'alice')") == ["banana", "date"])
        #expect(try names("!(complexity < 5) && done == false") == ["Cherry", "date"])
        #expect(try names("TRUEPREDICATE").count == 4)
        #expect(try names("FALSEPREDICATE").isEmpty)
    }

    @Test func stringOperators() throws {
        #expect(try names("itemName BEGINSWITH 'b'") == ["banana"])
        #expect(try names("itemName BEGINSWITH[c] 'a'") == ["Apple pie"])
        #expect(try names("itemName ENDSWITH 'e'") == ["Apple pie", "date"])
        #expect(try names("itemName CONTAINS[c] 'ERR'") == ["Cherry"])
        #expect(try names("itemName LIKE '?a*'") == ["banana", "date"])
        #expect(try names("itemName ==[c] 'CHERRY'") == ["Cherry"])
        #expect(try names("ownerId IN {'bob', 'carol'}") == ["banana", "date"])
        #expect(try names("ownerId < 'b'") == ["Apple pie", "Cherry"])
    }

    @Test func nullsAndNaN() throws {
        #expect(try names("score == nil") == ["banana"])
        #expect(try names("score != null") == ["Apple pie", "Cherry", "date"])
        #expect(try names("score > 1") == ["Apple pie", "date"])   // NaN and null compare false
        #expect(try names("due == nil").count == 3)
        #expect(try names("due > T1600000000:0") == ["date"])
    }

    @Test func lists() throws {
        #expect(try names("tags == 'food'") == ["Apple pie", "banana"])
        #expect(try names("ALL tags == 'food'") == ["banana", "Cherry"])   // vacuous for the empty list
        #expect(try names("NONE tags == 'food'") == ["Cherry", "date"])
        #expect(try names("tags.@count >= 2") == ["Apple pie", "date"])
        #expect(try names("tags.@size == 0") == ["Cherry"])
        #expect(try names("'sweet' IN tags") == ["Apple pie"])
    }

    @Test func sortAndLimit() throws {
        #expect(try names("TRUEPREDICATE SORT(complexity DESC)") == ["Cherry", "date", "banana", "Apple pie"])
        #expect(try names("TRUEPREDICATE SORT(ownerId ASC, complexity DESC) LIMIT(3)") == ["Cherry", "Apple pie", "banana"])
        #expect(try names("complexity > 0 LIMIT(0)").isEmpty)
    }

    @Test func propertyToProperty() throws {
        let schema = try ObjectSchema(name: "P", properties: [
            Property(name: "_id", type: .int, isPrimaryKey: true), Property(name: "a", type: .int), Property(name: "b", type: .double)])
        let q = try CompiledQuery("a < b", on: schema)
        #expect(q.matches([.int(1), .int(1), .double(1.5)]))
        #expect(!q.matches([.int(1), .int(2), .double(1.5)]))
    }

    @Test(arguments: [
        ("complexity <=", "offset 13"),
        ("complexity <= 'x'", "cannot compare 'complexity'"),
        ("nosuch == 1", "no property 'nosuch'"),
        ("complexity == $2", "uses $2"),
        ("(complexity == 1", "expected ')'"),
        ("complexity == 1 garbage", "expected AND, OR, SORT, LIMIT"),
        ("itemName == \"unterminated", "unterminated string"),
        ("complexity BEGINSWITH 'a'", "BEGINSWITH applies to strings"),
        ("done > true", "does not apply"),
        ("complexity ==[c] 4", "[c] applies"),
        ("owner.name == 'x'", "not supported yet"),
        ("ANY complexity == 1", "apply to list properties"),
        ("complexity == 99999999999999999999", "does not fit"),
        ("TRUEPREDICATE SORT(tags ASC)", "cannot sort by list"),
        ("_id == oid(123)", "24 hex digits"),
        ("", "expected a property name"),
    ])
    func badQueriesFailWithAClearMessage(query: String, fragment: String) {
        do {
            _ = try CompiledQuery(query, on: TestSchemas.item, arguments: [.int(1)])
            Issue.record("'\(query)' should not compile")
        } catch let e as FerryError {
            #expect(e.code == .query)
            #expect(e.message.contains(fragment), "message was: \(e.message)")
        } catch {
            Issue.record("unexpected error \(error)")
        }
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let deep = String(repeating: "(", count: 10_000) + "complexity == 1" + String(repeating: ")", count: 10_000)
        #expect(throws: FerryError.self) { try CompiledQuery(deep, on: TestSchemas.item) }
        let nots = String(repeating: "NOT ", count: 10_000) + "complexity == 1"
        #expect(throws: FerryError.self) { try CompiledQuery(nots, on: TestSchemas.item) }
    }

    @Test func literalsOfEveryKind() throws {
        let q = try CompiledQuery("_id == oid(010101010101010101010101)", on: TestSchemas.item)
        #expect(rows.filter(q.matches).count == 1)
        let schema = try ObjectSchema(name: "U", properties: [Property(name: "_id", type: .uuid, isPrimaryKey: true)])
        let u = try FerryUUID(string: "123e4567-e89b-12d3-a456-426614174000")
        #expect(try CompiledQuery("_id == uuid(123e4567-e89b-12d3-a456-426614174000)", on: schema).matches([.uuid(u)]))
        #expect(try CompiledQuery("itemName == \"a\\\"b\\u00e9\"", on: TestSchemas.item).matches(
            TestSchemas.row(9, owner: "", name: "a\"bé", complexity: 0)))
    }

    @Test func likeIsLinearOnHostilePatterns() {
        let text = Array(String(repeating: "a", count: 5_000).unicodeScalars)
        let pattern = Array((String(repeating: "*a", count: 200) + "b").unicodeScalars)
        #expect(!QueryEvaluator.likeMatch(text, pattern))
    }

    @Test func intDoubleComparisonIsExact() {
        let big: Int64 = 9_007_199_254_740_993 // 2^53 + 1, not representable as a double
        #expect(FerryValue.compare(.int(big), .double(9_007_199_254_740_992.0)) == 1)
        #expect(FerryValue.compare(.double(9_007_199_254_740_992.0), .int(big)) == -1)
        #expect(FerryValue.compare(.int(4), .double(4.0)) == 0)
        #expect(FerryValue.compare(.int(Int64.max), .double(1e19)) == -1)
    }
}
