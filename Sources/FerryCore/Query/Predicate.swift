/// A query checked against a class: property names resolved to indices, arguments substituted,
/// types verified. Evaluating it needs no schema lookups. AND and OR are n-ary, as in the parsed
/// tree, so the depth is the query's nesting (bounded by `QueryLimits.maxDepth`), not its length.
public indirect enum Predicate: Sendable {
    case constant(Bool)
    case and([Predicate])
    case or([Predicate])
    case not(Predicate)
    /// `property op value`; for list properties the quantifier says how elements combine.
    case compare(property: Int, op: QueryOperator, value: FerryValue, caseInsensitive: Bool, quantifier: ListQuantifier?)
    /// `property IN {values}`.
    case inSet(property: Int, values: [FerryValue], caseInsensitive: Bool, quantifier: ListQuantifier?)
    /// `list.@count op n`.
    case count(property: Int, op: QueryOperator, value: FerryValue)
    /// `propertyA op propertyB` (scalar properties).
    case compareProperties(lhs: Int, op: QueryOperator, rhs: Int, caseInsensitive: Bool)

    /// The top-level conjuncts, in query order, with nested ANDs (`a AND (b AND c)`) opened: what
    /// a storage engine may turn into an index lookup. A loop with its own stack, not recursion.
    public var conjuncts: [Predicate] {
        guard case .and = self else { return [self] }
        var out: [Predicate] = []
        var pending: [Predicate] = [self] // popped from the end, so operands go in reversed
        while let p = pending.popLast() {
            if case .and(let items) = p { pending.append(contentsOf: items.reversed()) } else { out.append(p) }
        }
        return out
    }
}
