/// Decides whether one object write from a client may stand (SPEC F-COMPWRITE): the object,
/// as the write leaves it, must match the client's subscriptions and the write filter of the
/// user's role; an update or delete must also have been allowed on the object as it was.
/// The server runs this on every uploaded change; a device can run it before upload to warn
/// early (F-PRECHECK), since both sides share FerryCore.
public struct WriteValidator: Sendable {
    public let objectSchema: ObjectSchema
    public let rules: CollectionRules
    /// The client's subscription queries on this class (a write matching any of them is in view).
    public let subscriptions: [CompiledQuery]

    public init(objectSchema: ObjectSchema, rules: CollectionRules, subscriptions: [CompiledQuery]) {
        self.objectSchema = objectSchema
        self.rules = rules
        self.subscriptions = subscriptions
    }

    /// nil when the write is allowed; otherwise the compensating write to report.
    /// `before` is the object before the write (nil for a create), `after` after it (nil for
    /// a delete), both as values in schema order.
    public func check(user: UserContext, before: [FerryValue]?, after: [FerryValue]?) -> CompensatingWrite? {
        guard let any = after ?? before else { return nil }
        let key = any[objectSchema.primaryKeyIndex]
        guard let role = rules.role(for: user) else {
            return .deniedByWriteFilter(objectType: objectSchema.name, primaryKey: key, role: "(no role applies)")
        }
        // Permissions first, as the seeds' examples report a wrong owner as a permission denial.
        // (Each state is checked on its own, without collecting them in an array, and its
        // fields are read through a closure that holds only the schema: this runs for every
        // uploaded object.)
        let os = objectSchema
        func writable(_ row: [FerryValue]?) -> Bool {
            guard let row else { return true }
            return role.canWrite(user: user, field: { name in os.propertyIndex(named: name).map { row[$0] } })
        }
        let kindAllowed = (before != nil || role.insert) && (after != nil || role.delete)
        guard kindAllowed && writable(before) && writable(after) else {
            return .deniedByWriteFilter(objectType: objectSchema.name, primaryKey: key, role: role.name)
        }
        func inView(_ row: [FerryValue]?) -> Bool { row.map { r in subscriptions.contains { $0.matches(r) } } ?? true }
        return inView(before) && inView(after) ? nil : .outsideView(objectType: objectSchema.name, primaryKey: key)
    }
}
