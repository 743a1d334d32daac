import FerryCore

/// Identifies an object across classes.
public struct ObjectKey: Hashable, Sendable {
    public var table: String
    public var key: FerryValue
    public init(table: String, key: FerryValue) {
        self.table = table
        self.key = key
    }
}
