import FerryCore

/// The part of a query that SQLite can answer: top-level conjuncts comparing a single-valued
/// property with a value by ==, <, <=, >, >= or IN. The stored forms order like the values
/// (see `ColumnCodec`), so the SQL condition selects a superset of the matches; the Swift
/// evaluator then decides exactly. This is what lets an indexed property use its index.
struct SQLPushdown {
    private(set) var whereClause = ""
    private(set) var bindings: [FerryValue] = []

    init(_ predicate: Predicate, schema: ObjectSchema) {
        var terms: [String] = []
        for c in predicate.conjuncts {
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
                terms.append("\(p.name.sqlIdentifier) \(sqlOp) ?")
                bindings.append(value)
            case let .inSet(property, values, caseInsensitive, quantifier):
                let p = schema.properties[property]
                guard quantifier == nil, !p.isList, !caseInsensitive, !values.isEmpty,
                      values.allSatisfy({ !$0.isNull && Self.storable($0, for: p) }) else { continue }
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
