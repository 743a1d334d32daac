/// A database's schema: its classes, with links resolved to their targets' key types.
public struct Schema: Hashable, Sendable {
    public private(set) var classes: [ObjectSchema]
    private var indexByName: [String: Int] = [:]

    public init(_ classes: [ObjectSchema]) throws {
        self.classes = classes
        for (i, c) in classes.enumerated() {
            guard indexByName[c.name] == nil else { throw FerryError(.invalidSchema, "two classes are named '\(c.name)'") }
            indexByName[c.name] = i
        }
        for ci in self.classes.indices {
            for pi in self.classes[ci].properties.indices {
                let p = self.classes[ci].properties[pi]
                guard p.type == .link, let target = p.linkTarget else { continue }
                guard let ti = indexByName[target] else {
                    throw FerryError(.invalidSchema, "link property '\(classes[ci].name).\(p.name)' targets unknown class '\(target)'")
                }
                let keyType = self.classes[ti].primaryKey.type
                self.classes[ci].resolveLink(at: pi, keyType: keyType)
            }
        }
    }

    public func classIndex(named name: String) -> Int? { indexByName[name] }

    public func objectSchema(named name: String) -> ObjectSchema? { indexByName[name].map { classes[$0] } }
}
