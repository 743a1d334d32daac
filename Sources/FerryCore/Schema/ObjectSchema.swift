/// One object class: a name, properties, and the primary key `_id`.
public struct ObjectSchema: Hashable, Sendable {
    public var name: String
    public var properties: [Property]
    public var isAsymmetric: Bool
    /// The index of `_id` in `properties`.
    public private(set) var primaryKeyIndex: Int = 0
    private var indexByName: [String: Int] = [:]
    /// The properties' names in order, for `propertyIndex(named:)`'s scan.
    private var names: [String] = []

    public init(name: String, properties: [Property], isAsymmetric: Bool = false) throws {
        self.name = name
        self.properties = properties
        self.isAsymmetric = isAsymmetric
        try validateName(name, what: "class")
        var pk: Int?
        for (i, p) in properties.enumerated() {
            try validateName(p.name, what: "property of class '\(name)'")
            guard indexByName[p.name] == nil else {
                throw FerryError(.invalidSchema, "class '\(name)' has two properties named '\(p.name)'")
            }
            indexByName[p.name] = i
            names.append(p.name)
            if p.isPrimaryKey {
                guard pk == nil else { throw FerryError(.invalidSchema, "class '\(name)' has more than one primary key") }
                guard p.name == "_id" else {
                    throw FerryError(.invalidSchema, "the primary key of class '\(name)' must be named '_id', not '\(p.name)'")
                }
                guard p.type.canBePrimaryKey, !p.isList, !p.isOptional else {
                    throw FerryError(.invalidSchema, "the primary key '\(name)._id' must be a required objectId, string, int or uuid, not \(p.typeText)")
                }
                pk = i
            } else if p.name == "_id" {
                throw FerryError(.invalidSchema, "property '\(name)._id' must be the primary key")
            }
            if p.isList && p.isOptional {
                throw FerryError(.invalidSchema, "list property '\(name).\(p.name)' cannot be optional (an empty list says 'nothing')")
            }
            if p.type == .link {
                guard let target = p.linkTarget, !target.isEmpty else {
                    throw FerryError(.invalidSchema, "link property '\(name).\(p.name)' has no target class")
                }
            } else if p.linkTarget != nil {
                throw FerryError(.invalidSchema, "property '\(name).\(p.name)' is not a link but names a link target")
            }
            if p.isIndexed && p.isList {
                throw FerryError(.invalidSchema, "list property '\(name).\(p.name)' cannot be indexed")
            }
        }
        guard let pkIndex = pk else { throw FerryError(.invalidSchema, "class '\(name)' has no primary key '_id'") }
        primaryKeyIndex = pkIndex
    }

    public var primaryKey: Property { properties[primaryKeyIndex] }

    /// Runs for every field of every object the server merges and every filter it checks: a
    /// class of a few properties compares names (short ones compare as two words) instead of
    /// hashing one, about a tenth of the cost (issue 23).
    public func propertyIndex(named name: String) -> Int? {
        if names.count <= Self.scanLimit { return names.firstIndex(of: name) }
        return indexByName[name]
    }

    /// Up to this many properties, `propertyIndex(named:)` scans.
    static let scanLimit = 16

    public func property(named name: String) -> Property? { propertyIndex(named: name).map { properties[$0] } }

    mutating func resolveLink(at index: Int, keyType: PropertyType) { properties[index].linkKeyType = keyType }
}

func validateName(_ name: String, what: String) throws {
    let n = name.utf8.count
    guard n >= 1 && n <= 63 else { throw FerryError(.invalidSchema, "a \(what) name must be 1 to 63 bytes, got '\(name)'") }
    guard !name.utf8.contains(0) else { throw FerryError(.invalidSchema, "a \(what) name cannot contain NUL") }
    guard !name.hasPrefix("__") else { throw FerryError(.invalidSchema, "\(what) name '\(name)' starts with '__', which Ferry reserves") }
}
