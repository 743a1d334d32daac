import FerryTestSupport
import Testing
@testable import FerryCore

/// Issue 11 point 4: a subscription QUERY of a few tens of thousands of OR terms overflowed the
/// stack of the server (the checker recursed once per term). The query language now has limits
/// that answer with a clear error, and nothing that walks a query recurses once per term.
@Suite("Query limits: long chains and deep nesting are refused clearly, never a crash")
struct QueryLimitsTests {
    /// Two integer properties with one-letter names, so that 1,000 terms fit in the byte limit.
    static let schema = try! ObjectSchema(name: "Pair", properties: [
        Property(name: "_id", type: .int, isPrimaryKey: true),
        Property(name: "a", type: .int),
        Property(name: "b", type: .int),
    ])

    /// What the query language answers for `text`, or nil when it compiles.
    func refusal(_ text: String, on schema: ObjectSchema = schema) -> FerryError? {
        do {
            _ = try CompiledQuery(text, on: schema)
            return nil
        } catch let e as FerryError {
            return e
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    /// 50,000 terms (about 1 MB) joined by OR, by AND, and mixed with NOT and parentheses.
    static let hugeQueries = [
        Array(repeating: "complexity == 1", count: 50_000).joined(separator: " OR "),
        Array(repeating: "complexity == 1", count: 50_000).joined(separator: " AND "),
        (0..<50_000).map { $0 % 3 == 0 ? "NOT (complexity == \($0) OR ownerId == 'x')" : "complexity != \($0)" }
            .joined(separator: " && "),
    ]

    @Test(arguments: 0..<3)
    func aFiftyThousandTermChainIsRefusedWithTheLengthLimit(which: Int) throws {
        let text = Self.hugeQueries[which]
        let e = try #require(refusal(text, on: TestSchemas.item))
        #expect(e.code == .query)
        #expect(e.message == "bad query: the query is \(text.utf8.count) bytes long; at most 16384 are allowed")
    }

    /// The structure, with the limits lifted: a 50,000-term chain is one flat node that
    /// parses, checks, evaluates and is freed without recursing per term (on the old binary
    /// tree this crashed the process with a stack overflow).
    @Test(arguments: 0..<3)
    func aChainFarBeyondTheLimitsStaysFlat(which: Int) throws {
        let text = Self.hugeQueries[which]
        let parsed = try QueryParser.parse(text, maxBytes: .max, maxTerms: .max)
        #expect(parsed.termCount == (which == 2 ? 50_000 + 50_000 / 3 + 1 : 50_000))
        switch parsed.predicate {
        case .or(let operands): #expect(which == 0 && operands.count == 50_000)
        case .and(let operands): #expect(which != 0 && operands.count == 50_000)
        default: Issue.record("expected one n-ary node at the top")
        }
        var compiler = QueryCompiler(schema: TestSchemas.item, arguments: [])
        let predicate = try compiler.compile(parsed.predicate)
        let one = TestSchemas.row(1, owner: "alice", name: "x", complexity: 1)
        let two = TestSchemas.row(2, owner: "alice", name: "x", complexity: 2)
        switch which {
        case 0:
            #expect(QueryEvaluator.evaluate(predicate, one))
            #expect(!QueryEvaluator.evaluate(predicate, two))
            #expect(predicate.conjuncts.count == 1)
        case 1:
            #expect(QueryEvaluator.evaluate(predicate, one))
            #expect(!QueryEvaluator.evaluate(predicate, two))
            #expect(predicate.conjuncts.count == 50_000)
        default:
            // complexity 1 is excluded by the term "complexity != 1"; 50,000 is mentioned nowhere.
            #expect(!QueryEvaluator.evaluate(predicate, one))
            #expect(QueryEvaluator.evaluate(predicate, TestSchemas.row(3, owner: "alice", name: "x", complexity: 50_000)))
            #expect(predicate.conjuncts.count == 50_000)
        }
    }

    /// Random terms over `a` and `b`, as text and as a Swift closure (the oracle). For an OR chain
    /// mostly `==` (and `<`, `>` near the ends of the range), for an AND chain mostly `!=` (and
    /// `>=`, `<=` near the ends), so that the chain holds for some rows and not for others.
    static func randomTerms(_ count: Int, joiner: String, rng: inout SplitMix64) -> [(text: String, holds: (Int64, Int64) -> Bool)] {
        typealias Op = (text: String, test: (Int64, Int64) -> Bool, values: ClosedRange<Int64>)
        let low: ClosedRange<Int64> = -620 ... -590, middle: ClosedRange<Int64> = -600...600, high: ClosedRange<Int64> = 590...620
        let ops: [Op]
        if joiner == "OR" {
            ops = [("==", { (x: Int64, y: Int64) in x == y }, middle), ("<", { (x: Int64, y: Int64) in x < y }, low),
                   (">", { (x: Int64, y: Int64) in x > y }, high)]
        } else {
            ops = [("!=", { (x: Int64, y: Int64) in x != y }, middle), (">=", { (x: Int64, y: Int64) in x >= y }, low),
                   ("<=", { (x: Int64, y: Int64) in x <= y }, high)]
        }
        return (0..<count).map { _ in
            let (op, test, range) = ops[rng.next() % 4 == 0 ? Int(1 + rng.next() % 2) : 0]
            let onA = rng.next() % 2 == 0
            let v = rng.next(in: range)
            return ("\(onA ? "a" : "b") \(op) \(v)", { a, b in test(onA ? a : b, v) })
        }
    }

    @Test(arguments: ["OR", "AND"])
    func aChainAtTheTermLimitCompilesAndEvaluatesLikeTheOracle(joiner: String) throws {
        var rng = SplitMix64(seed: joiner == "OR" ? 1 : 2)
        let terms = Self.randomTerms(QueryLimits.maxTerms, joiner: joiner, rng: &rng)
        let text = terms.map(\.text).joined(separator: " \(joiner) ")
        #expect(text.utf8.count <= QueryLimits.maxBytes)
        let q = try CompiledQuery(text, on: Self.schema)
        #expect(q.termCount == 1_000)
        var seen: [Bool: Int] = [:]
        for _ in 0..<2_000 {
            let a = rng.next(in: -630...630), b = rng.next(in: -630...630)
            let expected = joiner == "OR" ? terms.contains { $0.holds(a, b) } : terms.allSatisfy { $0.holds(a, b) }
            #expect(q.matches([.int(0), .int(a), .int(b)]) == expected, "a = \(a), b = \(b)")
            seen[expected, default: 0] += 1
        }
        #expect(seen[true, default: 0] > 100 && seen[false, default: 0] > 100, "\(seen)") // the oracle tells rows apart
    }

    @Test func oneTermMoreThanTheLimitIsRefused() throws {
        let text = Array(repeating: "a==1", count: 1_001).joined(separator: "||")
        let e = try #require(refusal(text))
        #expect(e.code == .query)
        #expect(e.message.hasPrefix("bad query: the query has 1001 terms; at most 1000 are allowed"), "message was: \(e.message)")
    }

    @Test func termsAreComparisonsConstantsAndSetValues() throws {
        #expect(try CompiledQuery("a == 1", on: Self.schema).termCount == 1)
        #expect(try CompiledQuery("a == 1 AND (b < 2 OR TRUEPREDICATE) OR NOT FALSEPREDICATE", on: Self.schema).termCount == 4)
        #expect(try CompiledQuery("a IN {1, 2, 3} AND b == 0", on: Self.schema).termCount == 4)
        #expect(try CompiledQuery("a IN {}", on: Self.schema).termCount == 1)
        #expect(try CompiledQuery("'x' IN tags", on: TestSchemas.item).termCount == 1)
        let atLimit = "a IN {" + (0..<1_000).map(String.init).joined(separator: ",") + "}"
        #expect(try CompiledQuery(atLimit, on: Self.schema).termCount == 1_000)
        let over = "a IN {" + (0..<1_001).map(String.init).joined(separator: ",") + "}"
        #expect(refusal(over)?.message.hasPrefix("bad query: the query has 1001 terms") == true)
    }

    @Test func theLengthLimitCountsUTF8Bytes() throws {
        let base = "a == 1"
        let atLimit = base + String(repeating: " ", count: QueryLimits.maxBytes - base.utf8.count)
        #expect(try CompiledQuery(atLimit, on: Self.schema).termCount == 1)
        let e = try #require(refusal(atLimit + " "))
        #expect(e.code == .query)
        #expect(e.message == "bad query: the query is 16385 bytes long; at most 16384 are allowed")
        // é is two bytes: 8,192 of them make 16,384 bytes in 8,192 characters.
        let wide = "ownerId == '" + String(repeating: "é", count: 8_192) + "'"
        #expect(refusal(wide, on: TestSchemas.item)?.message == "bad query: the query is \(wide.utf8.count) bytes long; at most 16384 are allowed")
    }

    /// Parentheses and NOT count together: 100 levels are fine, 101 are refused.
    @Test(arguments: ["(", "NOT ", "mixed"])
    func nestingIsBoundedForParenthesesAndNotTogether(kind: String) throws {
        func nested(_ levels: Int) -> String {
            var open = "", close = ""
            for level in 0..<levels {
                let paren = kind == "(" || (kind == "mixed" && level % 2 == 0)
                open += paren ? "(b == 0 OR " : "NOT "
                if paren { close += ")" }
            }
            return open + "a == 1" + String(close.reversed())
        }
        let q = try CompiledQuery(nested(QueryLimits.maxDepth), on: Self.schema)
        // With b != 0 every "b == 0 OR" passes the inner value through and there are 0, 100 or
        // 50 NOTs, an even number: the query is "a == 1".
        #expect(q.matches([.int(0), .int(1), .int(1)]))
        #expect(!q.matches([.int(0), .int(2), .int(1)]))
        let e = try #require(refusal(nested(QueryLimits.maxDepth + 1)))
        #expect(e.code == .query)
        #expect(e.message.hasSuffix("parentheses and NOT are nested more than 100 levels deep; at most 100 are allowed"), "message was: \(e.message)")
    }

    @Test func nestedBracesAreRefusedWithoutRecursing() throws {
        let e = try #require(refusal("a IN " + String(repeating: "{", count: 10_000)))
        #expect(e.message.contains("expected a literal or argument inside { }"), "message was: \(e.message)")
    }

    @Test func chainsAreOneNodeAndNestedAndsOpenForStorage() throws {
        let chain = try QueryParser.parse("a == 1 OR b == 2 OR a == 3").predicate
        guard case .or(let operands) = chain else { Issue.record("expected one .or"); return }
        #expect(operands.count == 3)
        let mixed = try QueryParser.parse("a == 1 AND b == 2 OR a == 3 AND b == 4 AND a == 5").predicate
        guard case .or(let groups) = mixed, groups.count == 2, case .and(let left) = groups[0], case .and(let right) = groups[1] else {
            Issue.record("AND binds tighter than OR, each chain one node"); return
        }
        #expect(left.count == 2 && right.count == 3)
        let q = try CompiledQuery("a == 1 AND (b == 2 AND (a == 3 AND b == 4)) AND a == 5", on: Self.schema)
        let properties: [Int] = q.predicate.conjuncts.map {
            if case .compare(let p, _, let v, _, _) = $0, case .int(let n) = v { return p * 10 + Int(n) }
            return -1
        }
        #expect(properties == [11, 22, 13, 24, 15])
    }
}
