import FerryTestSupport
import Testing
import FerryCore
@testable import FerryStore

@Suite("Queries through the store agree with the evaluator and use indexes")
struct QueryExecutionTests {
    /// Random data and random conditions: the store (SQL pushdown + evaluator) must return
    /// exactly what the evaluator alone returns over every object.
    @Test(arguments: [true, false])
    func pushdownNeverChangesResults(indexed: Bool) throws {
        let db = try Fixtures.memory(Fixtures.itemSchema(indexComplexity: indexed))
        defer { db.close() }
        var rng = SplitMix64(seed: indexed ? 7 : 8)
        let owners = ["alice", "bob", "Carol", "dave", "", "émile"]
        try db.beginWrite()
        for n in 0..<400 {
            let owner = owners[Int(rng.next() % UInt64(owners.count))]
            try db.create(classIndex: 0, values: [(0, Fixtures.oid(UInt32(n))), (1, .string(owner)), (2, .string("item-\(n)")),
                                                   (3, .int(Int64(rng.next() % 21) - 10))])
            if rng.next() % 3 == 0 { try db.set(classIndex: 0, key: Fixtures.oid(UInt32(n)), property: 5, value: .string(owner)) }
        }
        try db.commit()
        let all = try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: [])
        #expect(all.count == 400)
        let ops = ["==", "!=", "<", "<=", ">", ">="]
        for _ in 0..<80 {
            let op1 = ops[Int(rng.next() % 6)], op2 = ops[Int(rng.next() % 6)]
            let n = Int64(rng.next() % 25) - 12
            let owner = owners[Int(rng.next() % UInt64(owners.count))]
            let d = Double(Int64(rng.next() % 200) - 100) / 10
            for text in ["complexity \(op1) \(n)", "complexity \(op1) \(d) AND ownerId \(op2) '\(owner)'",
                         "ownerId \(op1) $0 OR complexity \(op2) $1", "complexity IN {\(n), \(n + 1), 3} AND note == nil",
                         "NOT (complexity \(op1) \(n)) AND ownerId ==[c] '\(owner)'"] {
                let q = try CompiledQuery(text, on: db.schema.classes[0], arguments: [.string(owner), .int(n)])
                let expected = all.filter(q.matches)
                let actual = try db.query(classIndex: 0, query: text, arguments: [.string(owner), .int(n)])
                #expect(actual == expected, "query \(text): \(actual.count) rows, expected \(expected.count)")
            }
        }
    }

    /// A query at the term limit (issue 11 point 4) runs through the store: SQLite refuses a
    /// WHERE of 1,000 ANDs ("Expression tree is too large"), so only the first
    /// `SQLPushdown.maxTerms` conjuncts go into SQL and the evaluator decides the rest.
    @Test func aChainAtTheTermLimitRunsAndAgreesWithTheEvaluator() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        try db.beginWrite()
        for n in 0..<40 { try Fixtures.createItem(db, UInt32(n), complexity: Int64(n) - 20) }
        try db.commit()
        let all = try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: [])
        // complexity > -10, ..., the last term the strictest: only the evaluator can apply it.
        let text = (0..<QueryLimits.maxTerms).map { "complexity>\($0 == QueryLimits.maxTerms - 1 ? 9 : -10)" }.joined(separator: "&&")
        let q = try CompiledQuery(text, on: db.schema.classes[0])
        #expect(q.termCount == QueryLimits.maxTerms)
        let pushdown = SQLPushdown(q.predicate, schema: db.schema.classes[0])
        #expect(pushdown.bindings.count == SQLPushdown.maxTerms)
        let actual = try db.query(classIndex: 0, query: text, arguments: [])
        #expect(actual == all.filter(q.matches))
        #expect(actual.count == 10)
        // One IN set of 1,000 values stays in Swift: older SQLite binds at most 999 values.
        let set = "complexity IN {" + (0..<QueryLimits.maxTerms).map { String($0 * 3) }.joined(separator: ",") + "}"
        let inSet = try CompiledQuery(set, on: db.schema.classes[0])
        #expect(SQLPushdown(inSet.predicate, schema: db.schema.classes[0]).bindings.isEmpty)
        #expect(try db.query(classIndex: 0, query: set, arguments: []) == all.filter(inSet.matches))
    }

    @Test func indexedConditionsUseTheIndex() throws {
        let db = try Fixtures.memory()
        defer { db.close() }
        let plan = try db.queryPlan(classIndex: 0, query: "complexity <= 4 AND ownerId == 'x'", arguments: [])
        #expect(plan.contains("index_Item_complexity"), "plan: \(plan)")
        let unindexed = try Fixtures.memory(Fixtures.itemSchema(indexComplexity: false))
        defer { unindexed.close() }
        let scan = try unindexed.queryPlan(classIndex: 0, query: "complexity <= 4", arguments: [])
        #expect(scan.contains("SCAN"), "plan: \(scan)")
        let byKey = try unindexed.queryPlan(classIndex: 0, query: "_id == oid(000000000000000000000001)", arguments: [])
        #expect(byKey.contains("autoindex") || byKey.contains("PRIMARY"), "plan: \(byKey)")
    }
}

