/// A query checked against a class: property names resolved to indices, arguments substituted,
/// types verified. Evaluating it needs no schema lookups.
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

    /// The top-level conjuncts: what a storage engine may turn into an index lookup.
    public var conjuncts: [Predicate] {
        if case .and(let items) = self { return items.flatMap(\.conjuncts) }
        return [self]
    }
}
