/// The write rules a server publishes to one session (SPEC F-PRECHECK): per class, the role
/// that applies to the session's user with every `%%user` value already expanded, and the
/// queryable fields. A device checks its write transactions against them before upload, with
/// the same `WriteValidator` the server runs, so it needs none of the user's data and learns
/// nothing of other roles. Advisory only: the server stays the authority (the rules may have
/// changed since the device got them).
public struct WriteRules: Sendable, Equatable {
    public var classes: [ClassWriteRules]

    public init(classes: [ClassWriteRules]) { self.classes = classes }

    public func rules(for objectType: String) -> ClassWriteRules? { classes.first { $0.objectType == objectType } }
}

/// The write rules of one class.
public struct ClassWriteRules: Sendable, Equatable {
    public var objectType: String
    /// The role that applies to the user (its `apply_when` already decided: `.all` here), or
    /// nil when no role applies (every write is denied).
    public var role: Role?
    /// The fields subscriptions on this class may use (the primary key included).
    public var queryableFields: [String]

    public init(objectType: String, role: Role?, queryableFields: [String]) {
        self.objectType = objectType
        self.role = role
        self.queryableFields = queryableFields
    }

    /// The rules as `WriteValidator` takes them: the one applicable role, or none.
    public var collectionRules: CollectionRules { CollectionRules(roles: role.map { [$0] } ?? []) }
}

extension Role {
    /// This role as one user sees it: `apply_when` decided (`.all`) and every `%%user` value
    /// in the filters replaced by the user's value (SPEC F-PRECHECK).
    public func expanded(for user: UserContext) -> Role {
        var r = self
        r.applyWhen = .all
        r.readFilter = readFilter?.expanded(for: user)
        r.writeFilter = writeFilter?.expanded(for: user)
        return r
    }
}

extension DocumentFilter {
    /// The filter with every `%%user` operand the user has replaced by its value. An operand
    /// the user does not have becomes `FilterOperand.unresolved`, which matches nothing, as the
    /// unexpanded filter would for this user.
    public func expanded(for user: UserContext) -> DocumentFilter {
        switch self {
        case .all: return .all
        case .and(let items): return .and(items.map { $0.expanded(for: user) })
        case .or(let items): return .or(items.map { $0.expanded(for: user) })
        case .nor(let items): return .nor(items.map { $0.expanded(for: user) })
        case let .field(name, condition): return .field(name, condition.expanded(for: user))
        }
    }
}

extension FieldCondition {
    func expanded(for user: UserContext) -> FieldCondition {
        func e(_ o: FilterOperand) -> FilterOperand {
            guard case .user(let path) = o else { return o }
            return user.resolve(path).map { .value($0) } ?? .unresolved
        }
        switch self {
        case .equal(let o): return .equal(e(o))
        case .notEqual(let o): return .notEqual(e(o))
        case .greater(let o): return .greater(e(o))
        case .greaterOrEqual(let o): return .greaterOrEqual(e(o))
        case .less(let o): return .less(e(o))
        case .lessOrEqual(let o): return .lessOrEqual(e(o))
        case .in(let os): return .in(os.map(e))
        case .notIn(let os): return .notIn(os.map(e))
        case .exists(let b): return .exists(b)
        case .all(let cs): return .all(cs.map { $0.expanded(for: user) })
        }
    }
}

extension FilterOperand {
    /// A `%%user` value the user did not have when the filter was expanded: no user context
    /// resolves this path, so every comparison with it is false (as with the missing value).
    public static let unresolved = FilterOperand.user(path: "unresolved")
}
