import FerryCore

/// Which of many sessions may read an object, without asking each session's role: each
/// session's read permission on a class is registered by the values it pins a field to (the
/// owner-read-write role's `{ "ownerId": "%%user.id" }` pins `ownerId` to the user's id), or
/// as open when it pins nothing. A catch-up sends a session an object only when its user may
/// read it (`SessionView.catchUp`: the state when the view holds it, an erase when it does
/// not), so the sessions found here are the only ones a changed object can concern.
///
/// `FanOutIndex` narrows by the subscriptions' queries and needs the object's values before
/// and after a change (an object that left a view owes its erase); a catch-up read from
/// storage has only the values after (or, erased, before the erase), which the read
/// permission needs and the query does not.
struct ReadPins {
    /// Members (positions in the caller's list) that may read any object of a class.
    private var open: [String: [Int]] = [:]
    /// Members that may read an object of a class only when a field has one of some values.
    private var pinned: [String: [Int: [FerryValue: [Int]]]] = [:]

    /// What a role lets one user read of a class.
    enum Reach: Equatable {
        /// Nothing: no role applies, or it grants no reading.
        case none
        /// Objects of any values (as far as this index can tell).
        case open
        /// Only objects whose field (by position) has one of the values; several pins: any.
        case pinned([Pin])
    }

    struct Pin: Equatable {
        let property: Int
        let values: [FerryValue]
    }

    /// Registers member `member`, whose user's `role` applies to `os`.
    mutating func add(_ member: Int, role: Role?, user: UserContext, of os: ObjectSchema) {
        switch Self.reach(role, user: user, of: os) {
        case .none: break
        case .open: open[os.name, default: []].append(member)
        case .pinned(let pins):
            for p in pins {
                for v in p.values { pinned[os.name, default: [:]][p.property, default: [:]][v, default: []].append(member) }
            }
        }
    }

    /// Every member that may read an object of `table` with `values` (possibly more; a member
    /// may be named twice).
    func candidates(table: String, values: [FerryValue]) -> [Int] {
        var out = open[table] ?? []
        for (property, byValue) in pinned[table] ?? [:] where property < values.count {
            if let members = byValue[values[property]] { out += members }
        }
        return out
    }

    /// `Role.canRead`: the write branch (write implies read) or the read branch, each with its
    /// filter; a branch without a filter, or with one this index cannot pin, reads everything.
    static func reach(_ role: Role?, user: UserContext, of os: ObjectSchema) -> Reach {
        guard let role, role.read || role.write else { return .none }
        var pins: [Pin] = []
        for (granted, filter) in [(role.write, role.writeFilter), (role.read, role.readFilter)] where granted {
            guard let filter, let p = Self.pins(filter, user: user, of: os) else { return .open }
            pins += p
        }
        return .pinned(pins)
    }

    /// The pins a document filter implies for one user: a document it matches has one of the
    /// pinned values in one of the pinned fields. Nil when it implies none.
    static func pins(_ filter: DocumentFilter, user: UserContext, of os: ObjectSchema) -> [Pin]? {
        switch filter {
        case let .field(name, condition):
            guard let p = os.propertyIndex(named: name), !os.properties[p].isList,
                  let values = Self.values(condition, user: user) else { return nil }
            return [Pin(property: p, values: values)]
        case .and(let items):
            // Every conjunct holds: one that pins is enough.
            for item in items { if let p = pins(item, user: user, of: os) { return p } }
            return nil
        case .or(let items):
            // One of the alternatives holds: each must pin.
            var all: [Pin] = []
            for item in items {
                guard let p = pins(item, user: user, of: os) else { return nil }
                all += p
            }
            return all
        case .all, .nor:
            return nil
        }
    }

    /// The values a field condition admits, when they are few and compare by plain equality
    /// (strings, ObjectIds, UUIDs: numbers compare across int and double). A `%%user` value
    /// the user does not have matches nothing (`FieldCondition.holds`).
    static func values(_ condition: FieldCondition, user: UserContext) -> [FerryValue]? {
        func resolve(_ o: FilterOperand) -> FerryValue? {
            switch o {
            case .value(let v): return v
            case .user(let path): return user.resolve(path)
            }
        }
        switch condition {
        case .equal(let o):
            guard let v = resolve(o) else { return [] }
            return indexable(v) ? [v] : nil
        case .in(let operands):
            let vs = operands.compactMap(resolve)
            return vs.allSatisfy(indexable) ? vs : nil
        case .all(let conditions):
            for c in conditions { if let vs = values(c, user: user) { return vs } }
            return nil
        default:
            return nil
        }
    }

    private static func indexable(_ v: FerryValue) -> Bool {
        switch v {
        case .string, .objectId, .uuid: return true
        default: return false
        }
    }
}
