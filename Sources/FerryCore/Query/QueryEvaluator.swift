/// Evaluates a checked predicate on an object's values (schema order). It recurses once per
/// level of the predicate (bounded by `QueryLimits.maxDepth`) and loops over the operands of
/// an AND or OR, stopping at the first that decides.
public enum QueryEvaluator {
    public static func evaluate(_ p: Predicate, _ values: [FerryValue]) -> Bool {
        switch p {
        case .constant(let b): return b
        case .and(let items): return items.allSatisfy { evaluate($0, values) }
        case .or(let items): return items.contains { evaluate($0, values) }
        case .not(let inner): return !evaluate(inner, values)
        case let .compare(property, op, value, ci, quantifier):
            return quantified(values[property], quantifier) { test($0, op, value, ci) }
        case let .inSet(property, set, ci, quantifier):
            return quantified(values[property], quantifier) { element in set.contains { test(element, .equal, $0, ci) } }
        case let .count(property, op, value):
            guard case .list(let items) = values[property] else { return false }
            return test(.int(Int64(items.count)), op, value, false)
        case let .compareProperties(lhs, op, rhs, ci):
            return test(values[lhs], op, values[rhs], ci)
        }
    }

    private static func quantified(_ v: FerryValue, _ quantifier: ListQuantifier?, _ body: (FerryValue) -> Bool) -> Bool {
        guard let quantifier else { return body(v) }
        guard case .list(let items) = v else { return false }
        switch quantifier {
        case .any: return items.contains(where: body)
        case .all: return items.allSatisfy(body)
        case .none: return !items.contains(where: body)
        }
    }

    /// One comparison between two scalar values.
    public static func test(_ a: FerryValue, _ op: QueryOperator, _ b: FerryValue, _ caseInsensitive: Bool) -> Bool {
        switch op {
        case .equal: return equal(a, b, caseInsensitive)
        case .notEqual: return !equal(a, b, caseInsensitive)
        case .in: return equal(a, b, caseInsensitive)
        case .less, .lessOrEqual, .greater, .greaterOrEqual:
            if a.isNull || b.isNull || isNaN(a) || isNaN(b) { return false }
            guard let c = FerryValue.compare(a, b) else { return false }
            switch op {
            case .less: return c < 0
            case .lessOrEqual: return c <= 0
            case .greater: return c > 0
            default: return c >= 0
            }
        case .beginsWith, .endsWith, .contains, .like:
            guard var x = bytes(a), var y = bytes(b) else { return false }
            if caseInsensitive { x = lowered(x); y = lowered(y) }
            switch op {
            case .beginsWith: return x.starts(with: y)
            case .endsWith: return x.count >= y.count && x.suffix(y.count).elementsEqual(y)
            case .contains: return y.isEmpty || containsSubsequence(x, y)
            default: return likeMatch(Array(String(decoding: x, as: UTF8.self).unicodeScalars), Array(String(decoding: y, as: UTF8.self).unicodeScalars))
            }
        }
    }

    private static func isNaN(_ v: FerryValue) -> Bool {
        if case .double(let d) = v { return d.isNaN }
        return false
    }

    private static func equal(_ a: FerryValue, _ b: FerryValue, _ ci: Bool) -> Bool {
        if ci, case .string(let x) = a, case .string(let y) = b { return x.lowercased().utf8.elementsEqual(y.lowercased().utf8) }
        return FerryValue.queryEquals(a, b)
    }

    private static func bytes(_ v: FerryValue) -> [UInt8]? {
        switch v {
        case .string(let s): return Array(s.utf8)
        case .binary(let b): return b
        default: return nil
        }
    }

    private static func lowered(_ b: [UInt8]) -> [UInt8] { Array(String(decoding: b, as: UTF8.self).lowercased().utf8) }

    private static func containsSubsequence(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= hay.count else { return false }
        for start in 0...(hay.count - needle.count) where hay[start] == needle[0] {
            if hay[start..<start + needle.count].elementsEqual(needle) { return true }
        }
        return false
    }

    /// LIKE: `*` matches any run of characters, `?` exactly one. Iterative with backtracking to
    /// the last `*`, so hostile patterns stay linear-ish instead of exponential.
    static func likeMatch(_ text: [Unicode.Scalar], _ pattern: [Unicode.Scalar]) -> Bool {
        var t = 0, p = 0, starP = -1, starT = 0
        while t < text.count {
            if p < pattern.count && (pattern[p] == "?" || (pattern[p] != "*" && pattern[p] == text[t])) {
                t += 1; p += 1
            } else if p < pattern.count && pattern[p] == "*" {
                starP = p; starT = t; p += 1
            } else if starP >= 0 {
                p = starP + 1; starT += 1; t = starT
            } else {
                return false
            }
        }
        while p < pattern.count && pattern[p] == "*" { p += 1 }
        return p == pattern.count
    }
}
