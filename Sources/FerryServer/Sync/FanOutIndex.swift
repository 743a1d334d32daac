import FerryCore

/// Which sessions a changed object may concern, without asking every session's view: each
/// session's queries are registered by class and, when every query of the class pins a
/// queryable field to values (`ownerId == "u1"`, `ownerId IN {...}`), by that field's values.
/// A commit then looks up the object's values before and after the change; only sessions
/// found there (and those whose queries on the class pin nothing) are checked with their view
/// (`SessionView.contains`, which also applies permissions). The index only narrows: every
/// session whose view may hold the object, before or after, is among the candidates.
struct FanOutIndex {
    /// A class's sessions whose every query pins `property` to one of a set of values.
    private var pinned: [String: [Int: [FerryValue: Set<SessionKey>]]] = [:]
    /// A class's sessions with a query that pins nothing: candidates for every change.
    private var open: [String: Set<SessionKey>] = [:]
    /// Where each session is registered, to unregister it.
    private var registered: [SessionKey: [Registration]] = [:]

    private enum Registration {
        case pinned(table: String, property: Int, values: [FerryValue])
        case open(table: String)
    }

    /// Registers (or re-registers) a session's view.
    mutating func set(_ key: SessionKey, view: SessionView) {
        remove(key)
        var done: [Registration] = []
        for (table, queries) in view.queries {
            let pins = queries.map(Self.pin(of:))
            if pins.contains(where: { $0 == nil }) {
                open[table, default: []].insert(key)
                done.append(.open(table: table))
                continue
            }
            for case let (property, values)? in pins {
                for v in values { pinned[table, default: [:]][property, default: [:]][v, default: []].insert(key) }
                done.append(.pinned(table: table, property: property, values: values))
            }
        }
        if !done.isEmpty { registered[key] = done }
    }

    mutating func remove(_ key: SessionKey) {
        for r in registered.removeValue(forKey: key) ?? [] {
            switch r {
            case .open(let table):
                open[table]?.remove(key)
                if open[table]?.isEmpty == true { open[table] = nil }
            case let .pinned(table, property, values):
                for v in values {
                    pinned[table]?[property]?[v]?.remove(key)
                    if pinned[table]?[property]?[v]?.isEmpty == true { pinned[table]?[property]?[v] = nil }
                }
            }
        }
    }

    /// Every session whose view may hold an object of `table` with `before` or `after` values
    /// (nil: the object did not exist, or no longer does).
    func candidates(table: String, before: [FerryValue]?, after: [FerryValue]?) -> Set<SessionKey> {
        var out = open[table] ?? []
        for (property, byValue) in pinned[table] ?? [:] {
            for values in [before, after] {
                guard let values, property < values.count, let keys = byValue[values[property]] else { continue }
                out.formUnion(keys)
            }
        }
        return out
    }

    /// The field and values a query pins (one of its top-level conditions is an exact
    /// equality or IN on a single-valued property), or nil. Only values whose equality is
    /// plain hashing (strings, ObjectIds, UUIDs) are pinned: numbers compare across int and
    /// double, so a numeric condition is left to the view.
    static func pin(of query: CompiledQuery) -> (Int, [FerryValue])? {
        for c in query.predicate.conjuncts {
            switch c {
            case let .compare(p, .equal, v, false, nil) where indexable(v) && single(p, query):
                return (p, [v])
            case let .inSet(p, vs, false, nil) where !vs.isEmpty && vs.allSatisfy(indexable) && single(p, query):
                return (p, vs)
            default:
                continue
            }
        }
        return nil
    }

    private static func indexable(_ v: FerryValue) -> Bool {
        switch v {
        case .string, .objectId, .uuid: return true
        default: return false
        }
    }

    private static func single(_ p: Int, _ query: CompiledQuery) -> Bool {
        p < query.objectSchema.properties.count && !query.objectSchema.properties[p].isList
    }
}
