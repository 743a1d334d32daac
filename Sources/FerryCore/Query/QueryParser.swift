/// Parses the query language (in the style of Realm Query Language):
///
///     query      := or [SORT(key [ASC|DESC], ...)] [LIMIT(n)]
///     or         := and (("OR" | "||") and)*
///     and        := not (("AND" | "&&") not)*
///     not        := ("NOT" | "!") not | "(" or ")" | TRUEPREDICATE | FALSEPREDICATE | comparison
///     comparison := [ANY|SOME|ALL|NONE] operand op ["[c]"] operand
///     operand    := keypath[.@count|.@size] | literal | $n | "{" operand, ... "}"
///
/// Nesting is bounded so hostile input cannot exhaust the stack.
public struct QueryParser {
    private var tokens: [QueryToken]
    private var index = 0
    private var depth = 0
    static let maxDepth = 100

    public static func parse(_ text: String) throws -> ParsedQuery {
        var p = QueryParser(tokens: try QueryLexer.tokenize(text))
        return try p.parseQuery()
    }

    private init(tokens: [QueryToken]) { self.tokens = tokens }

    private var current: QueryToken { tokens[min(index, tokens.count - 1)] }
    private mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    private func fail(_ expected: String, _ token: QueryToken? = nil) -> FerryError {
        let t = token ?? current
        let found = t.kind == .end ? "the end of the query" : "'\(t.text)'"
        return FerryError(.query, "bad query at offset \(t.offset): expected \(expected), found \(found)")
    }

    private func isSymbol(_ s: String) -> Bool { current.kind == .symbol(s) }

    private mutating func expectSymbol(_ s: String) throws {
        guard isSymbol(s) else { throw fail("'\(s)'") }
        advance()
    }

    private mutating func parseQuery() throws -> ParsedQuery {
        let predicate = try parseOr()
        var sort: [SortKey] = []
        var limit: Int?
        while current.kind != .end {
            if current.isKeyword("SORT") {
                advance()
                try expectSymbol("(")
                repeat {
                    if isSymbol(",") { advance() }
                    guard case .identifier(let name) = current.kind, !isReserved(current) else { throw fail("a property name to sort by") }
                    let offset = current.offset
                    advance()
                    var ascending = true
                    if current.isKeyword("ASC") || current.isKeyword("ASCENDING") { advance() }
                    else if current.isKeyword("DESC") || current.isKeyword("DESCENDING") { ascending = false; advance() }
                    sort.append(SortKey(property: name, ascending: ascending, offset: offset))
                } while isSymbol(",")
                try expectSymbol(")")
            } else if current.isKeyword("LIMIT") {
                advance()
                try expectSymbol("(")
                guard case .integer(let n) = current.kind, n >= 0, n <= Int64(Int32.max) else { throw fail("a non-negative integer limit") }
                advance()
                try expectSymbol(")")
                limit = Int(n)
            } else {
                throw fail("AND, OR, SORT, LIMIT or the end of the query")
            }
        }
        return ParsedQuery(predicate: predicate, sort: sort, limit: limit)
    }

    private mutating func nest() throws {
        depth += 1
        guard depth <= Self.maxDepth else { throw FerryError(.query, "bad query at offset \(current.offset): nested more than \(Self.maxDepth) levels deep") }
    }

    private mutating func parseOr() throws -> QueryNode {
        try nest(); defer { depth -= 1 }
        var node = try parseAnd()
        while current.isKeyword("OR") || isSymbol("||") {
            advance()
            node = .or(node, try parseAnd())
        }
        return node
    }

    private mutating func parseAnd() throws -> QueryNode {
        var node = try parseNot()
        while current.isKeyword("AND") || isSymbol("&&") {
            advance()
            node = .and(node, try parseNot())
        }
        return node
    }

    private mutating func parseNot() throws -> QueryNode {
        try nest(); defer { depth -= 1 }
        if current.isKeyword("NOT") || isSymbol("!") {
            advance()
            return .not(try parseNot())
        }
        if isSymbol("(") {
            advance()
            let inner = try parseOr()
            try expectSymbol(")")
            return inner
        }
        if current.isKeyword("TRUEPREDICATE") { advance(); return .constant(true) }
        if current.isKeyword("FALSEPREDICATE") { advance(); return .constant(false) }
        return .comparison(try parseComparison())
    }

    private mutating func parseComparison() throws -> QueryComparison {
        let start = current.offset
        var quantifier: ListQuantifier?
        if current.isKeyword("ANY") || current.isKeyword("SOME") { quantifier = .any; advance() }
        else if current.isKeyword("ALL") { quantifier = .all; advance() }
        else if current.isKeyword("NONE") { quantifier = ListQuantifier.none; advance() }
        let lhs = try parseOperand()
        var op: QueryOperator
        switch current.kind {
        case .symbol("=="): op = .equal
        case .symbol("!="): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="): op = .greaterOrEqual
        case .identifier(let word):
            guard let o = QueryOperator(rawValue: word.uppercased()), o.isStringOperator || o == .in else {
                throw fail("a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, IN)")
            }
            op = o
        default:
            throw fail("a comparison operator (==, !=, <, <=, >, >=, BEGINSWITH, ENDSWITH, CONTAINS, LIKE, IN)")
        }
        advance()
        var caseInsensitive = false
        if isSymbol("[") {
            advance()
            guard case .identifier(let flag) = current.kind, flag == "c" || flag == "C" else { throw fail("'c' (case-insensitive) inside [ ]") }
            advance()
            try expectSymbol("]")
            caseInsensitive = true
        }
        let rhs = try parseOperand()
        return QueryComparison(lhs: lhs, op: op, rhs: rhs, caseInsensitive: caseInsensitive, quantifier: quantifier, offset: start)
    }

    private func isReserved(_ t: QueryToken) -> Bool {
        guard case .identifier(let s) = t.kind else { return false }
        return ["AND", "OR", "NOT", "TRUEPREDICATE", "FALSEPREDICATE", "BEGINSWITH", "ENDSWITH", "CONTAINS",
                "LIKE", "IN", "SORT", "LIMIT", "ANY", "SOME", "ALL", "NONE", "NIL", "NULL", "TRUE", "FALSE"].contains(s.uppercased())
    }

    private mutating func parseOperand() throws -> QueryOperand {
        let t = current
        switch t.kind {
        case .string(let s): advance(); return .literal(.string(s), offset: t.offset)
        case .integer(let i): advance(); return .literal(.int(i), offset: t.offset)
        case .double(let d): advance(); return .literal(.double(d), offset: t.offset)
        case .argument(let n): advance(); return .argument(n, offset: t.offset)
        case .timestamp(let s, let n): advance(); return .literal(.timestamp(try Timestamp(seconds: s, nanoseconds: n)), offset: t.offset)
        case .value(let v): advance(); return .literal(v, offset: t.offset)
        case .symbol("{"):
            advance()
            var items: [QueryOperand] = []
            if !isSymbol("}") {
                repeat {
                    if isSymbol(",") { advance() }
                    let item = try parseOperand()
                    if case .property = item { throw fail("a literal or argument inside { }", t) }
                    if case .set = item { throw fail("a literal or argument inside { }", t) }
                    items.append(item)
                } while isSymbol(",")
            }
            try expectSymbol("}")
            return .set(items, offset: t.offset)
        case .identifier(let word):
            let upper = word.uppercased()
            if upper == "NIL" || upper == "NULL" { advance(); return .literal(.null, offset: t.offset) }
            if upper == "TRUE" { advance(); return .literal(.bool(true), offset: t.offset) }
            if upper == "FALSE" { advance(); return .literal(.bool(false), offset: t.offset) }
            guard !isReserved(t), !word.hasPrefix("@") else { throw fail("a property name, a literal or an argument") }
            advance()
            var count = false
            if isSymbol(".") {
                advance()
                guard case .identifier(let agg) = current.kind else { throw fail("@count or @size after '.'") }
                if agg == "@count" || agg == "@size" { count = true; advance() }
                else { throw FerryError(.query, "bad query at offset \(t.offset): key paths through links ('\(word).\(agg)') are not supported yet; only '\(word).@count' and '\(word).@size'") }
            }
            return .property(name: word, count: count, offset: t.offset)
        default:
            throw fail("a property name, a literal or an argument")
        }
    }
}
