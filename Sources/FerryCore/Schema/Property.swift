/// One property of an object class.
public struct Property: Hashable, Sendable {
    public var name: String
    public var type: PropertyType
    public var isOptional: Bool
    public var isPrimaryKey: Bool
    public var isIndexed: Bool
    public var isList: Bool
    /// For links: the target class, and the type of its primary key (filled in by `Schema`).
    public var linkTarget: String?
    public var linkKeyType: PropertyType?

    public init(name: String, type: PropertyType, isOptional: Bool = false, isPrimaryKey: Bool = false,
                isIndexed: Bool = false, isList: Bool = false, linkTarget: String? = nil) {
        self.name = name
        self.type = type
        self.isOptional = isOptional
        self.isPrimaryKey = isPrimaryKey
        self.isIndexed = isIndexed
        self.isList = isList
        self.linkTarget = linkTarget
        self.linkKeyType = nil
    }

    /// The type values of this property have: a link's values are its target's primary keys.
    public var valueType: PropertyType { type == .link ? (linkKeyType ?? .link) : type }

    /// Checks one scalar value (a list element for lists) against the property.
    public func validateElement(_ value: FerryValue, className: String) throws {
        if value.isNull {
            if !isList && (isOptional || type == .link) { return }
            throw FerryError(.wrongType, isList ? "the elements of list '\(className).\(name)' cannot be null"
                                                : "property '\(className).\(name)' is required and cannot be null")
        }
        if case .list = value {
            throw FerryError(.wrongType, "property '\(className).\(name)' holds \(valueType) values, not lists")
        }
        guard value.type == valueType else {
            throw FerryError(.wrongType, "property '\(className).\(name)' is of type \(typeText), got a \(value.type.map { "\($0)" } ?? "null") value")
        }
    }

    /// The type as a person reads it, e.g. `string?`, `list<int>`, `link<Person>`.
    public var typeText: String {
        let base = type == .link ? "link<\(linkTarget ?? "?")>" : type.description
        if isList { return "list<\(base)>" }
        return isOptional ? base + "?" : base
    }

    /// What a property holds when an object is created without a value for it.
    public var defaultValue: FerryValue {
        if isList { return .list([]) }
        if isOptional || type == .link { return .null }
        return .zero(of: type)
    }
}
