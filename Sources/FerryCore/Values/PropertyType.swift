/// The type of a property or value. Raw values are the C API's `FERRY_TYPE_*`.
public enum PropertyType: Int32, Sendable, CaseIterable, CustomStringConvertible {
    case bool = 1, int = 2, double = 3, string = 4, binary = 5, timestamp = 6, objectId = 7, uuid = 8
    /// A link to an object of another class, held as that object's primary key.
    case link = 9

    public var description: String {
        switch self {
        case .bool: return "bool"
        case .int: return "int"
        case .double: return "double"
        case .string: return "string"
        case .binary: return "binary"
        case .timestamp: return "timestamp"
        case .objectId: return "objectId"
        case .uuid: return "uuid"
        case .link: return "link"
        }
    }

    /// Whether `<`, `>` and SORT are meaningful.
    public var isOrdered: Bool {
        switch self {
        case .int, .double, .string, .timestamp, .objectId, .uuid: return true
        case .bool, .binary, .link: return false
        }
    }

    public var isNumeric: Bool { self == .int || self == .double }

    /// The types a primary key may have.
    public var canBePrimaryKey: Bool { self == .objectId || self == .string || self == .int || self == .uuid }
}
