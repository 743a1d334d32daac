/// Identifies an object across classes: its class (table) and primary key. The client's store,
/// the server's storage and the rules all name objects by it.
public struct ObjectKey: Hashable, Sendable {
    public var table: String
    public var key: FerryValue
    public init(table: String, key: FerryValue) {
        self.table = table
        self.key = key
    }
}
