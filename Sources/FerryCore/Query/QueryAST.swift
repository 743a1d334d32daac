/// A parsed query before it is checked against a schema.
public struct ParsedQuery: Sendable {
    public var predicate: QueryNode
    public var sort: [SortKey]
    public var limit: Int?
    /// The predicate's terms, counted as `QueryLimits.maxTerms` counts them.
    public var termCount: Int
}

public struct SortKey: Sendable, Hashable {
    public var property: String
    public var ascending: Bool
    /// Where the property name starts in the query text, for error messages.
    public var offset: Int
}

/// The predicate's tree. AND and OR are n-ary: a chain `a OR b OR c ...` is one `.or` holding
/// every operand, so the tree is only as deep as the query's parentheses and NOTs (bounded by
/// `QueryLimits.maxDepth`), and walking or destroying it never recurses once per term.
public indirect enum QueryNode: Sendable {
    case constant(Bool)
    /// Two or more operands, all of which must hold.
    case and([QueryNode])
    /// Two or more operands, one of which must hold.
    case or([QueryNode])
    case not(QueryNode)
    case comparison(QueryComparison)
}

public enum QueryOperator: String, Sendable {
    case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case beginsWith = "BEGINSWITH", endsWith = "ENDSWITH", contains = "CONTAINS", like = "LIKE", `in` = "IN"

    /// The operator seen from the other side: `4 < x` is `x > 4`.
    var flipped: QueryOperator? {
        switch self {
        case .equal, .notEqual: return self
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        default: return nil
        }
    }

    var isOrdering: Bool { self == .less || self == .lessOrEqual || self == .greater || self == .greaterOrEqual }
    var isStringOperator: Bool { self == .beginsWith || self == .endsWith || self == .contains || self == .like }
}

public enum ListQuantifier: Sendable { case any, all, none }

public enum QueryOperand: Sendable {
    /// A property, optionally with `.@count` / `.@size` for lists.
    case property(name: String, count: Bool, offset: Int)
    case literal(FerryValue, offset: Int)
    case argument(Int, offset: Int)
    /// `{a, b, c}`, the right side of IN.
    case set([QueryOperand], offset: Int)

    var offset: Int {
        switch self {
        case .property(_, _, let o), .literal(_, let o), .argument(_, let o), .set(_, let o): return o
        }
    }

    /// The number of values in braces (0 for anything else), for counting terms.
    var setCount: Int {
        if case .set(let items, _) = self { return items.count }
        return 0
    }
}

public struct QueryComparison: Sendable {
    public var lhs: QueryOperand
    public var op: QueryOperator
    public var rhs: QueryOperand
    public var caseInsensitive: Bool
    public var quantifier: ListQuantifier?
    public var offset: Int
}
