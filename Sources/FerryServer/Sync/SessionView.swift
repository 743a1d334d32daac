import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// What one session may see: per class, the compiled subscription queries and the user's
/// read permission. An object is in the view when its class is subscribed, one of the class's
/// queries matches it and the user's role may read it (SPEC F-VIEW).
struct SessionView: Sendable {
    let user: UserContext
    /// Queries by class name.
    let queries: [String: [CompiledQuery]]
    /// The applicable role by class name (nil: no role applies, nothing readable).
    let roles: [String: Role?]

    static func empty(user: UserContext) -> SessionView { SessionView(user: user, queries: [:], roles: [:]) }

    /// Compiles a subscription set, or says what is wrong with it (a clear message for the
    /// client's subscription set error).
    /// The set's size is checked against `limits` before anything is compiled, so a huge set
    /// costs no more than reading it.
    static func make(_ subscriptions: [Subscription], user: UserContext, app: AppConfiguration, schema: Schema,
                     limits: SyncLimits = SyncLimits()) -> Result<SessionView, SubscriptionError> {
        guard subscriptions.count <= limits.maxSubscriptionsPerSet else {
            return .failure(SubscriptionError("the subscription set has \(subscriptions.count) subscriptions; at most \(limits.maxSubscriptionsPerSet) are allowed"))
        }
        let queryBytes = subscriptions.reduce(0) { $0 + $1.query.utf8.count }
        guard queryBytes <= limits.maxQueryBytesPerSet else {
            return .failure(SubscriptionError("the subscription set's queries have \(queryBytes) bytes together; at most \(limits.maxQueryBytesPerSet) are allowed"))
        }
        var queries: [String: [CompiledQuery]] = [:]
        var roles: [String: Role?] = [:]
        var terms = 0
        for s in subscriptions {
            guard let os = schema.objectSchema(named: s.objectType) else {
                return .failure(SubscriptionError("subscription '\(s.name)': no object type '\(s.objectType)' in the app's schema"))
            }
            if os.isAsymmetric || app.sync.asymmetricTables.contains(os.name) {
                return .failure(SubscriptionError("subscription '\(s.name)': '\(s.objectType)' is an asymmetric (ingest-only) type and cannot be subscribed to"))
            }
            let q: CompiledQuery
            do { q = try CompiledQuery(s.query, on: os) } catch let e as FerryError {
                return .failure(SubscriptionError("subscription '\(s.name)': invalid query '\(excerpt(s.query))' on '\(s.objectType)': \(e.message)"))
            } catch {
                return .failure(SubscriptionError("subscription '\(s.name)': invalid query '\(excerpt(s.query))'"))
            }
            terms += q.termCount
            guard terms <= limits.maxTermsPerSet else {
                return .failure(SubscriptionError("the subscription set's queries have more than \(limits.maxTermsPerSet) terms together; at most \(limits.maxTermsPerSet) are allowed"))
            }
            let allowed = Set(app.sync.queryableFields + (app.sync.collectionQueryableFields[os.name] ?? []) + [os.primaryKey.name])
            for p in q.predicate.properties.sorted() where !allowed.contains(os.properties[p].name) {
                return .failure(SubscriptionError(
                    "subscription '\(s.name)': the query '\(excerpt(s.query))' on '\(s.objectType)' uses the field '\(os.properties[p].name)', which is not queryable; queryable fields: \(allowed.sorted().joined(separator: ", "))"))
            }
            queries[os.name, default: []].append(q)
            if roles[os.name] == nil { roles[os.name] = .some(app.rules(for: os.name)?.role(for: user)) }
        }
        return .success(SessionView(user: user, queries: queries, roles: roles))
    }

    var classes: [String] { Array(queries.keys) }

    func contains(_ values: [FerryValue], of os: ObjectSchema) -> Bool {
        guard let qs = queries[os.name], case .some(.some(let role)) = roles[os.name] else { return false }
        guard qs.contains(where: { $0.matches(values) }) else { return false }
        return Self.canRead(role, user: user, values, of: os)
    }

    /// The queries of a class for write validation (an empty list puts every write outside).
    func subscriptions(of table: String) -> [CompiledQuery] { queries[table] ?? [] }

    /// What a device catching up on `c` (changed after its last server version) is sent: the
    /// object when it is in this view; else an erase, but only when the user may read the
    /// object as it is (or, erased, as it was): a device learns the primary key of an object
    /// only if its user may read it (it ignores erases of objects it does not have).
    func catchUp(_ c: ChangedObject, of os: ObjectSchema, app: AppConfiguration) -> Instruction? {
        if let o = c.object, contains(o.values, of: os) { return o.fullState(os) }
        guard let last = c.object ?? c.erasedState, mayRead(last.values, of: os, app: app) else { return nil }
        return .erase(table: os.name, key: c.key)
    }

    /// Whether the user's role on the class may read an object with these values, whether or
    /// not the class is subscribed (the view's role when it is, so a catch-up over many objects
    /// does not look the role up again for each).
    func mayRead(_ values: [FerryValue], of os: ObjectSchema, app: AppConfiguration) -> Bool {
        let role = roles[os.name] ?? app.rules(for: os.name)?.role(for: user)
        guard let role else { return false }
        return Self.canRead(role, user: user, values, of: os)
    }

    private static func canRead(_ role: Role, user: UserContext, _ values: [FerryValue], of os: ObjectSchema) -> Bool {
        role.canRead(user: user) { name in os.propertyIndex(named: name).map { values[$0] } }
    }
}

/// The start of a query text for an error message (a rejected query may be very long: the
/// message, the event log and the client's error stay small).
func excerpt(_ text: String, limit: Int = 200) -> String {
    let bytes = text.utf8.count
    guard bytes > limit else { return text }
    return String(decoding: text.utf8.prefix(limit), as: UTF8.self) + "… (\(bytes) bytes)"
}

struct SubscriptionError: Error, Sendable {
    let message: String
    init(_ message: String) { self.message = message }
}

extension Predicate {

    /// Every property the predicate reads.
    var properties: Set<Int> {
        switch self {
        case .constant: return []
        case .and(let items), .or(let items): return items.reduce(into: Set<Int>()) { $0.formUnion($1.properties) }
        case .not(let p): return p.properties
        case .compare(let p, _, _, _, _), .inSet(let p, _, _, _), .count(let p, _, _): return [p]
        case .compareProperties(let l, _, let r, _): return [l, r]
        }
    }
}

extension AppConfiguration {
    /// The rules of a collection, or the default rules.
    func rules(for table: String) -> CollectionRules? {
        collections.first { $0.objectSchema.name == table }?.rules ?? defaultRules
    }
}
