/// A role of a collection's rules, in the App Services format the seeds use:
/// `{ "name": "owner-read-write", "apply_when": {}, "document_filters": { "read": {...},
/// "write": {...} }, "read": true, "write": true }`. The first role whose `apply_when` matches
/// the user applies.
public struct Role: Sendable, Equatable {
    public var name: String
    /// Evaluated against the user (as `%%user` fields), not against a document.
    public var applyWhen: DocumentFilter
    public var readFilter: DocumentFilter?
    public var writeFilter: DocumentFilter?
    public var read: Bool
    public var write: Bool
    public var insert: Bool
    public var delete: Bool

    public init(name: String, applyWhen: DocumentFilter = .all, readFilter: DocumentFilter? = nil, writeFilter: DocumentFilter? = nil,
                read: Bool = false, write: Bool = false, insert: Bool = true, delete: Bool = true) {
        self.name = name
        self.applyWhen = applyWhen
        self.readFilter = readFilter
        self.writeFilter = writeFilter
        self.read = read
        self.write = write
        self.insert = insert
        self.delete = delete
    }

    /// Whether the role applies to this user: `apply_when` is matched with `%%user` values
    /// on both sides (its fields name user values such as `%%user.custom_data.admin`).
    public func applies(to user: UserContext) -> Bool {
        applyWhen.matches(user: user) { name in
            name.hasPrefix("%%user.") ? user.resolve(String(name.dropFirst(7))) : nil
        }
    }

    /// Whether the user may read a document: `read`, and the read filter if there is one.
    /// Write permission implies read, as in App Services.
    public func canRead(user: UserContext, field: (String) -> FerryValue?) -> Bool {
        if canWrite(user: user, field: field) { return true }
        guard read else { return false }
        return readFilter?.matches(user: user, field: field) ?? true
    }

    /// Whether the user may write a document as it is after the write (and, for updates and
    /// deletes, as it was before, which the caller checks with the old values).
    public func canWrite(user: UserContext, field: (String) -> FerryValue?) -> Bool {
        guard write else { return false }
        return writeFilter?.matches(user: user, field: field) ?? true
    }
}

/// The roles of one collection, in order.
public struct CollectionRules: Sendable, Equatable {
    public var roles: [Role]
    public init(roles: [Role]) { self.roles = roles }

    /// The first role that applies to the user, if any (no role: no access).
    public func role(for user: UserContext) -> Role? { roles.first { $0.applies(to: user) } }
}
