/// A query ready to run on one class: the predicate, then SORT and LIMIT. The client uses it for
/// local queries and subscriptions; the server uses the same code to decide what a client sees.
public struct CompiledQuery: Sendable {
    public let objectSchema: ObjectSchema
    public let predicate: Predicate
    public let sort: [(property: Int, ascending: Bool)]
    public let limit: Int?
    public let text: String
    /// How many terms the predicate has (comparisons, TRUEPREDICATE and FALSEPREDICATE, with
    /// `IN {…}` counting one per value), at most `QueryLimits.maxTerms`. Evaluating the query on
    /// one object costs about this many comparisons, so a server bounds the total over a
    /// subscription set with it.
    public let termCount: Int

    /// Parses and checks `text` against `objectSchema`, substituting `$n` from `arguments`.
    public init(_ text: String, on objectSchema: ObjectSchema, arguments: [FerryValue] = []) throws {
        let parsed = try QueryParser.parse(text)
        var compiler = QueryCompiler(schema: objectSchema, arguments: arguments)
        self.objectSchema = objectSchema
        self.predicate = try compiler.compile(parsed.predicate)
        self.sort = try parsed.sort.map { key in
            guard let i = objectSchema.propertyIndex(named: key.property) else {
                throw FerryError(.query, "bad query at offset \(key.offset): cannot sort by '\(key.property)': class '\(objectSchema.name)' has no such property")
            }
            let p = objectSchema.properties[i]
            guard !p.isList else { throw FerryError(.query, "bad query at offset \(key.offset): cannot sort by list property '\(p.name)'") }
            return (i, key.ascending)
        }
        self.limit = parsed.limit
        self.text = text
        self.termCount = parsed.termCount
    }

    /// Whether an object, given as its property values in schema order, matches.
    public func matches(_ values: [FerryValue]) -> Bool { QueryEvaluator.evaluate(predicate, values) }

    /// Applies SORT (stable: ties keep their order) and LIMIT to matching rows.
    public func orderAndLimit<Row>(_ rows: [Row], values: (Row) -> [FerryValue]) -> [Row] {
        var out = rows
        if !sort.isEmpty {
            let keyed = out.enumerated().map { ($0.offset, $0.element, values($0.element)) }
            let sorted = keyed.sorted { a, b in
                for key in sort {
                    let c = FerryValue.compare(a.2[key.property], b.2[key.property]) ?? 0
                    if c != 0 { return key.ascending ? c < 0 : c > 0 }
                }
                return a.0 < b.0
            }
            out = sorted.map(\.1)
        }
        if let limit, out.count > limit { out = Array(out.prefix(limit)) }
        return out
    }
}
