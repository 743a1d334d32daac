import FerryCore

/// The part of a query that SQLite can answer: top-level conjuncts comparing a single-valued
/// property with a value by ==, <, <=, >, >= or IN. The stored forms order like the values
/// (see `ColumnCodec`), so the SQL condition selects a superset of the matches; the Swift
/// evaluator then decides exactly. This is what lets an indexed property use its index.
///
/// The conjuncts come from a loop over the predicate's n-ary AND (no recursion per term), and at
/// most `maxTerms` of them go into SQL: SQLite parses `x AND y AND ...` into a tree one level
/// deeper per AND and refuses one deeper than 1,000 levels ("Expression tree is too large"),
/// which a query at `QueryLimits.maxTerms` would reach. Leaving conjuncts out only widens the
/// superset, and SQLite uses one index per table anyway. For the same reason an `IN` set goes
/// into SQL only while the bound values stay within 999, the most SQLite before 3.32 allows.
struct SQLPushdown {
    private(set) var whereClause = ""
    private(set) var bindings: [FerryValue] = []
    static let maxTerms = 64
    static let maxBindings = 999

    init(_ predicate: Predicate, schema: ObjectSchema) {
        var terms: [String] = []
        for c in predicate.conjuncts where terms.count < Self.maxTerms {
            switch c {
            case let .compare(property, op, value, caseInsensitive, quantifier):
                let p = schema.properties[property]
                guard quantifier == nil, !p.isList, !caseInsensitive, !value.isNull, Self.storable(value, for: p) else { continue }
                let sqlOp: String
                switch op {
                case .equal: sqlOp = "="
                case .less: sqlOp = "<"
                case .lessOrEqual: sqlOp = "<="
                case .greater: sqlOp = ">"
                case .greaterOrEqual: sqlOp = ">="
                default: continue
                }
                if case .double(let d) = value, d.isNaN { continue }
                guard bindings.count < Self.maxBindings else { continue }
                terms.append("\(p.name.sqlIdentifier) \(sqlOp) ?")
                bindings.append(value)
            case let .inSet(property, values, caseInsensitive, quantifier):
                let p = schema.properties[property]
                guard quantifier == nil, !p.isList, !caseInsensitive, !values.isEmpty,
                      bindings.count + values.count <= Self.maxBindings, values.allSatisfy({ !$0.isNull && Self.storable($0, for: p) }) else { continue }
                terms.append("\(p.name.sqlIdentifier) IN (\(values.map { _ in "?" }.joined(separator: ", ")))")
                bindings += values
            case .constant(false):
                terms.append("0")
            default:
                continue
            }
        }
        if !terms.isEmpty { whereClause = " WHERE " + terms.joined(separator: " AND ") }
    }

    /// Whether the value is stored in the property's column form (numbers cross-compare).
    private static func storable(_ v: FerryValue, for p: Property) -> Bool {
        guard let t = v.type else { return false }
        return t == p.valueType || (t.isNumeric && p.valueType.isNumeric)
    }
}
