/// An object a download changed while the device had recent local writes to it: its state just
/// before the download and after it (with the device's unacknowledged writes laid on top
/// again), and those local writes. The sync session keeps the latest capture of each object
/// until an error 231 names it (the server sends a revert's download just before the error),
/// then turns it into a `RevertedObject` (SPEC F-NOLOSS). A rule from values to values: the
/// store reads the states and the writes (`Database.integrate`), this decides what was lost.
package struct RevertCapture: Sendable {
    package let objectSchema: ObjectSchema
    package let primaryKey: FerryValue
    package let before: [FerryValue]?
    package let after: [FerryValue]?
    /// The device's writes to the object after the capture's floor, oldest first.
    package let writes: [LocalWrite]

    package var objectType: String { objectSchema.name }

    package init(objectSchema: ObjectSchema, primaryKey: FerryValue, before: [FerryValue]?, after: [FerryValue]?, writes: [LocalWrite]) {
        self.objectSchema = objectSchema
        self.primaryKey = primaryKey
        self.before = before
        self.after = after
        self.writes = writes
    }

    /// The same object captured again by a later download before the error arrived: the
    /// device's state before the first, after the last.
    package func followed(by later: RevertCapture) -> RevertCapture {
        var writes = self.writes
        let known = Set(writes.map(\.version))
        writes += later.writes.filter { !known.contains($0.version) }
        return RevertCapture(objectSchema: objectSchema, primaryKey: primaryKey, before: before, after: later.after,
                             writes: writes.sorted { $0.version < $1.version })
    }

    /// What the revert took: nil when the object ends as it was (nothing was lost).
    package var reverted: RevertedObject? {
        let pk = objectSchema.primaryKeyIndex
        let props = objectSchema.properties
        switch (before, after) {
        case let (before?, nil):
            let values = props.indices.filter { $0 != pk && $0 < before.count }.map {
                RevertedValue(property: $0, name: props[$0].name, value: before[$0])
            }
            let lost = writes.filter { if case .erase = $0.instruction { return false } else { return true } }
            return RevertedObject(objectType: objectType, primaryKey: primaryKey, revert: .removed, values: values, writes: lost)
        case (nil, _?):
            let lost = writes.filter { if case .erase = $0.instruction { return true } else { return false } }
            return RevertedObject(objectType: objectType, primaryKey: primaryKey, revert: .restored, values: [], writes: lost)
        case let (before?, after?):
            let changed = props.indices.filter { $0 != pk && $0 < before.count && $0 < after.count && before[$0] != after[$0] }
            guard !changed.isEmpty else { return nil }
            let names = Set(changed.map { props[$0].name })
            let lost = writes.filter { w in
                switch w.instruction {
                case .erase: return false
                case .create(_, _, let fields): return fields.contains { names.contains($0.name) }
                default: return w.instruction.field.map { names.contains($0) } ?? false
                }
            }
            return RevertedObject(objectType: objectType, primaryKey: primaryKey, revert: .changed,
                                  values: changed.map { RevertedValue(property: $0, name: props[$0].name, value: before[$0]) }, writes: lost)
        case (nil, nil):
            return nil
        }
    }
}
