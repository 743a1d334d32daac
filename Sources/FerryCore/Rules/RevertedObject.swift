/// What the server's revert of a compensating write took from the device, for one object (SPEC
/// F-NOLOSS). The seeds' SDK reports only the object and a reason, and the device's values and
/// every later local write to the object vanish; this keeps them, so the host can show them or
/// put them back (`Database.reapply`).
public struct RevertedObject: Sendable, Equatable {
    /// What the revert did to the device's object.
    public enum Revert: Int32, Sendable, Equatable {
        /// The device had the object and the revert erased it: a create the server refused, or
        /// an update that took the object where the user may not see it. `values` holds every
        /// property.
        case removed = 0
        /// The revert set properties back to the server's values; `values` holds the device's
        /// values of those properties.
        case changed = 1
        /// The device had deleted the object and the revert brought it back; `values` is empty.
        case restored = 2
    }

    public var objectType: String
    public var primaryKey: FerryValue
    public var revert: Revert
    /// The device's values just before the revert, of the properties it removed or changed
    /// back, in schema order (the primary key is not among them). A list is a `.list`.
    public var values: [RevertedValue]
    /// The device's local writes to the object that the revert undid or discarded, oldest
    /// first: the rejected write and every later write to the object that did not survive the
    /// revert. For `removed` that is every write but deletes, for `restored` the deletes, for
    /// `changed` the writes to the properties it set back (all of them: a list's inserts are
    /// not told apart). Writes are looked for from the upload the revert answers on.
    public var writes: [LocalWrite]

    public init(objectType: String, primaryKey: FerryValue, revert: Revert, values: [RevertedValue], writes: [LocalWrite]) {
        self.objectType = objectType
        self.primaryKey = primaryKey
        self.revert = revert
        self.values = values
        self.writes = writes
    }

    /// The device's value of a property before the revert, if the revert changed it.
    public func value(of property: String) -> FerryValue? { values.first { $0.name == property }?.value }
}

/// One property's value as the device had it before a revert.
public struct RevertedValue: Sendable, Equatable {
    /// The property's index in the class (as `Database` writes take it) and its name.
    public var property: Int
    public var name: String
    public var value: FerryValue

    public init(property: Int, name: String, value: FerryValue) {
        self.property = property
        self.name = name
        self.value = value
    }
}

/// One local write as the device committed it: the local version (the write transaction's
/// history version) and the change.
public struct LocalWrite: Sendable, Equatable {
    public var version: UInt64
    public var instruction: Instruction

    public init(version: UInt64, instruction: Instruction) {
        self.version = version
        self.instruction = instruction
    }
}
