import FerryCore

extension Database {
    /// Puts back what a compensating write's revert took (SPEC F-NOLOSS), as new local writes
    /// that sync like any other: a removed object is created again with the device's values
    /// (or, if it exists again, given them), changed-back properties get the device's values,
    /// a restored object is deleted again. `overrides` (property index and value, lists as
    /// `.list`) replace or add values first, e.g. a corrected `ownerId`, so the write passes
    /// the server's rules this time. Joins the handle's open write transaction, else runs in
    /// one of its own. Throws `.notFound` for changed properties of an object that is gone,
    /// and the write errors of `create`, `set` and `modifyList` (for a record of another
    /// schema, a wrong property or value).
    public func reapply(_ reverted: RevertedObject, overriding overrides: [(Int, FerryValue)] = []) throws {
        guard let ci = schema.classes.firstIndex(where: { $0.name == reverted.objectType }) else {
            throw FerryError(.noSuchClass, "no class '\(reverted.objectType)' in this database's schema")
        }
        let os = schema.classes[ci]
        var values: [Int: FerryValue] = [:]
        for v in reverted.values {
            guard v.property >= 0, v.property < os.properties.count, os.properties[v.property].name == v.name else {
                throw FerryError(.noSuchProperty, "class '\(os.name)' has no property '\(v.name)' with key \(v.property)")
            }
            values[v.property] = v.value
        }
        for (p, v) in overrides {
            guard p >= 0, p < os.properties.count else {
                throw FerryError(.noSuchProperty, "class '\(os.name)' has no property with key \(p) (it has \(os.properties.count))")
            }
            guard p != os.primaryKeyIndex else { throw FerryError(.invalidArgument, "the primary key of '\(os.name)' cannot be overridden") }
            values[p] = v
        }
        if reverted.revert == .restored, !overrides.isEmpty {
            throw FerryError(.invalidArgument, "a restored object is deleted again: overrides do not apply")
        }
        let own = !isInTransaction
        if own { try beginWrite() }
        do {
            let key = reverted.primaryKey
            let existing = try object(classIndex: ci, key: key)
            switch reverted.revert {
            case .restored:
                if existing != nil { try delete(classIndex: ci, key: key) }
            case .removed, .changed:
                let ordered = values.sorted { $0.key < $1.key }
                if let existing {
                    for (p, v) in ordered where existing[p] != v { try putBack(ci, key, p, v, os, replacing: true) }
                } else {
                    guard reverted.revert == .removed else {
                        throw FerryError(.notFound, "the object '\(key.keyText)' of class '\(os.name)' no longer exists: its changed properties cannot be put back")
                    }
                    let scalars = ordered.filter { !os.properties[$0.key].isList }.map { ($0.key, $0.value) }
                    try create(classIndex: ci, values: [(os.primaryKeyIndex, key)] + scalars)
                    for (p, v) in ordered where os.properties[p].isList { try putBack(ci, key, p, v, os, replacing: false) }
                }
            }
            if own { try commit() }
        } catch {
            // Undoes what was written; the error thrown is the one that matters.
            if own { try? cancel() }
            throw error
        }
    }

    /// Sets one property: a scalar with `set`, a list by clearing it (when `replacing`) and
    /// inserting the elements.
    private func putBack(_ ci: Int, _ key: FerryValue, _ p: Int, _ v: FerryValue, _ os: ObjectSchema, replacing: Bool) throws {
        guard os.properties[p].isList else { return try set(classIndex: ci, key: key, property: p, value: v) }
        guard case .list(let items) = v else {
            throw FerryError(.wrongType, "'\(os.name).\(os.properties[p].name)' is a list: its value must be a list")
        }
        if replacing { try modifyList(classIndex: ci, key: key, property: p, .clear) }
        for (n, item) in items.enumerated() { try modifyList(classIndex: ci, key: key, property: p, .insert(n, item)) }
    }
}
