/// Parses the query language (in the style of Realm Query Language):
///
///     query      := or [SORT(key [ASC|DESC], ...)] [LIMIT(n)]
///     or         := and (("OR" | "||") and)*
///     and        := not (("AND" | "&&") not)*
///     not        := ("NOT" | "!") not | "(" or ")" | TRUEPREDICATE | FALSEPREDICATE | comparison
///     comparison := [ANY|SOME|ALL|NONE] operand op ["[c]"] operand
///     operand    := keypath[.@count|.@size] | literal | $n | "{" literal-or-$n, ... "}"
///
/// Hostile input must not exhaust the stack, so the parser recurses only where the query nests:
/// at "(" and at NOT, both bounded together by `QueryLimits.maxDepth`. A chain of AND or OR is
/// read by a loop into one n-ary node, however long it is. `QueryLimits` also bounds the text's
/// length (checked before lexing) and the number of terms.
public struct QueryParser {
    private var tokens: [QueryToken]
    private var index = 0
    /// Open parentheses and NOTs around the current position.
    private var depth = 0
    /// Terms read so far, counted as `QueryLimits.maxTerms` counts them.
    private var terms = 0

    public static func parse(_ text: String) throws -> ParsedQuery {
        try parse(text, maxBytes: QueryLimits.maxBytes, maxTerms: QueryLimits.maxTerms)
    }

    /// `parse` with other bounds on length and terms. Tests use it to show that a chain far
    /// beyond the limits still parses, checks, evaluates and is freed without deep recursion.
    static func parse(_ text: String, maxBytes: Int, maxTerms: Int) throws -> ParsedQuery {
        let length = text.utf8.count
        guard length <= maxBytes else {
            throw FerryError(.query, "bad query: the query is \(length) bytes long; at most \(maxBytes) are allowed")
        }
        var p = QueryParser(tokens: try QueryLexer.tokenize(text))
        let parsed = try p.parseQuery()
        guard parsed.termCount <= maxTerms else {
            throw FerryError(.query, "bad query: the query has \(parsed.termCount) terms; at most \(maxTerms) are allowed"
                             + " (a term is a comparison, TRUEPREDICATE or FALSEPREDICATE; IN { } counts one per value)")
        }
        return parsed
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
        return ParsedQuery(predicate: predicate, sort: sort, limit: limit, termCount: terms)
    }

    /// Enters one level of nesting (the current token is "(" or NOT); the caller leaves it.
    private mutating func nest() throws {
        depth += 1
        guard depth <= QueryLimits.maxDepth else {
            throw FerryError(.query, "bad query at offset \(current.offset): parentheses and NOT are nested more than \(QueryLimits.maxDepth) levels deep; at most \(QueryLimits.maxDepth) are allowed")
        }
    }

    private var atOr: Bool { current.isKeyword("OR") || isSymbol("||") }
    private var atAnd: Bool { current.isKeyword("AND") || isSymbol("&&") }

    /// A chain of OR: one `.or` with every operand (a single operand stands alone).
    private mutating func parseOr() throws -> QueryNode {
        let first = try parseAnd()
        guard atOr else { return first }
        var operands = [first]
        while atOr {
            advance()
            operands.append(try parseAnd())
        }
        return .or(operands)
    }

    /// A chain of AND: one `.and` with every operand (a single operand stands alone).
    private mutating func parseAnd() throws -> QueryNode {
        let first = try parseNot()
        guard atAnd else { return first }
        var operands = [first]
        while atAnd {
            advance()
            operands.append(try parseNot())
        }
        return .and(operands)
    }

    private mutating func parseNot() throws -> QueryNode {
        if current.isKeyword("NOT") || isSymbol("!") {
            try nest(); defer { depth -= 1 }
            advance()
            return .not(try parseNot())
        }
        if isSymbol("(") {
            try nest(); defer { depth -= 1 }
            advance()
            let inner = try parseOr()
            try expectSymbol(")")
            return inner
        }
        if current.isKeyword("TRUEPREDICATE") { advance(); terms += 1; return .constant(true) }
        if current.isKeyword("FALSEPREDICATE") { advance(); terms += 1; return .constant(false) }
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
        // `p IN {a, b, c}` costs what `p == a OR p == b OR p == c` costs.
        terms += max(1, lhs.setCount + rhs.setCount)
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
                    // Refused before reading it: sets do not nest, and "{{{{..." must not recurse.
                    if isSymbol("{") { throw fail("a literal or argument inside { }") }
                    let item = try parseOperand()
                    if case .property = item { throw fail("a literal or argument inside { }", t) }
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
