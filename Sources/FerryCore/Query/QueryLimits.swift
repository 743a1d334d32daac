/// The largest query Ferry accepts, in one place. A query comes from the host and, with sync,
/// from any logged-in device's subscriptions, which the server compiles and evaluates against
/// every object of a class; these bounds keep what one query can cost in memory, time and stack
/// small and independent of what a hostile client sends. docs/query-language.md ("Limits") gives
/// the numbers and the error texts; every refusal is a `FerryError` of code `.query`.
public enum QueryLimits {
    /// The longest query text, in UTF-8 bytes (SORT and LIMIT included). Checked before the text
    /// is read at all.
    public static let maxBytes = 16_384

    /// The most terms in one query. A term is a comparison, `TRUEPREDICATE` or `FALSEPREDICATE`;
    /// `property IN {a, b, c}` counts one term per value in the braces (it is `property == a OR
    /// property == b OR property == c`). `CompiledQuery.termCount` reports a query's count, so a
    /// server can also bound the terms of a whole subscription set.
    public static let maxTerms = 1_000

    /// The deepest nesting: every open parenthesis and every `NOT` (or `!`) around a term counts
    /// one level. A chain `a OR b OR c ...` is one level however long it is; only nesting makes
    /// the parser, the checker and the evaluator recurse, so this bounds their stack.
    public static let maxDepth = 100
}
