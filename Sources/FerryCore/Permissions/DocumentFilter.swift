/// A document filter in the MongoDB query form App Services rules use, e.g.
/// `{ "ownerId": "%%user.id" }` or `{ "$or": [{ "public": true }, { "ownerId": "%%user.id" }] }`.
/// It lives in FerryCore because the server decides with it what each user may read and write,
/// and a device will check its writes against the rules the server publishes (F-PRECHECK).
public indirect enum DocumentFilter: Sendable, Equatable {
    /// `{}`: every document.
    case all
    case and([DocumentFilter])
    case or([DocumentFilter])
    case nor([DocumentFilter])
    case field(String, FieldCondition)
}

/// The condition on one field: `"x": 5`, `"x": {"$gt": 1, "$lt": 9}`, `"x": {"$in": [...]}`.
public indirect enum FieldCondition: Sendable, Equatable {
    case equal(FilterOperand)
    case notEqual(FilterOperand)
    case greater(FilterOperand)
    case greaterOrEqual(FilterOperand)
    case less(FilterOperand)
    case lessOrEqual(FilterOperand)
    case `in`([FilterOperand])
    case notIn([FilterOperand])
    case exists(Bool)
    /// Several operators on one field, all of which must hold.
    case all([FieldCondition])
}

/// A literal, or a value of the logged-in user (`%%user.id`, `%%user.data.email`,
/// `%%user.custom_data.team`), resolved when the filter is evaluated.
public enum FilterOperand: Sendable, Equatable {
    case value(FerryValue)
    case user(path: String)
}

/// What `%%user` expands to.
public struct UserContext: Sendable, Equatable {
    public var id: String
    /// Metadata of the user's identity (`%%user.data.<name>`), e.g. from a custom JWT.
    public var data: [String: FerryValue]
    /// The user's custom data document (`%%user.custom_data.<name>`).
    public var customData: [String: FerryValue]

    public init(id: String, data: [String: FerryValue] = [:], customData: [String: FerryValue] = [:]) {
        self.id = id
        self.data = data
        self.customData = customData
    }

    /// The value of `%%user.<path>`, or nil when the user has no such value.
    public func resolve(_ path: String) -> FerryValue? {
        if path == "id" { return .string(id) }
        if path.hasPrefix("data.") { return data[String(path.dropFirst(5))] }
        if path.hasPrefix("custom_data.") { return customData[String(path.dropFirst(12))] }
        return nil
    }
}

extension DocumentFilter {
    /// Whether a document matches. `field` returns a field's value (nil when the document has
    /// no such field, which compares like null, as in MongoDB). A `%%user` value the user does
    /// not have makes its comparison false: an unknown expansion never grants access.
    public func matches(user: UserContext, field: (String) -> FerryValue?) -> Bool {
        switch self {
        case .all: return true
        case .and(let items): return items.allSatisfy { $0.matches(user: user, field: field) }
        case .or(let items): return items.contains { $0.matches(user: user, field: field) }
        case .nor(let items): return !items.contains { $0.matches(user: user, field: field) }
        case let .field(name, condition): return condition.holds(for: field(name), user: user)
        }
    }
}

extension FieldCondition {
    func holds(for value: FerryValue?, user: UserContext) -> Bool {
        func resolve(_ o: FilterOperand) -> FerryValue? {
            switch o {
            case .value(let v): return v
            case .user(let path): return user.resolve(path)
            }
        }
        let v = value ?? .null
        // As in MongoDB, a condition on an array field holds when it holds for an element.
        func any(_ test: (FerryValue) -> Bool) -> Bool {
            if case .list(let items) = v { return test(v) || items.contains(where: test) }
            return test(v)
        }
        func equal(_ a: FerryValue, _ b: FerryValue) -> Bool {
            if a.isNull && b.isNull { return true }
            return FerryValue.queryEquals(a, b)
        }
        func ordered(_ o: FilterOperand, _ accept: (Int) -> Bool) -> Bool {
            guard let target = resolve(o), !target.isNull else { return false }
            return any { element in
                guard !element.isNull, let c = FerryValue.compare(element, target) else { return false }
                return accept(c)
            }
        }
        switch self {
        case .equal(let o):
            guard let target = resolve(o) else { return false }
            return any { equal($0, target) }
        case .notEqual(let o):
            guard let target = resolve(o) else { return false }
            return !any { equal($0, target) }
        case .greater(let o): return ordered(o) { $0 > 0 }
        case .greaterOrEqual(let o): return ordered(o) { $0 >= 0 }
        case .less(let o): return ordered(o) { $0 < 0 }
        case .lessOrEqual(let o): return ordered(o) { $0 <= 0 }
        case .in(let operands):
            let targets = operands.compactMap(resolve)
            return any { element in targets.contains { equal(element, $0) } }
        case .notIn(let operands):
            let targets = operands.compactMap(resolve)
            guard targets.count == operands.count else { return false }
            return !any { element in targets.contains { equal(element, $0) } }
        case .exists(let wanted):
            return (value != nil && !(value?.isNull ?? true)) == wanted
        case .all(let conditions):
            return conditions.allSatisfy { $0.holds(for: value, user: user) }
        }
    }
}
