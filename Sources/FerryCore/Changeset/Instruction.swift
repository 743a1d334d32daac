/// One change to one object, as it is recorded in the history and sent over sync. Classes and
/// properties are named (not numbered) so that a changeset means the same thing on every
/// device and on the server, whatever order their schemas list things in.
public enum Instruction: Hashable, Sendable {
    /// A new object with its initial values (properties not listed hold their defaults).
    case create(table: String, key: FerryValue, fields: [FieldValue])
    case erase(table: String, key: FerryValue)
    case set(table: String, key: FerryValue, field: String, value: FerryValue)
    /// A commutative integer add: concurrent adds from several devices sum up.
    case addInteger(table: String, key: FerryValue, field: String, delta: Int64)
    case listInsert(table: String, key: FerryValue, field: String, index: Int, value: FerryValue)
    case listSet(table: String, key: FerryValue, field: String, index: Int, value: FerryValue)
    case listErase(table: String, key: FerryValue, field: String, index: Int)
    case listClear(table: String, key: FerryValue, field: String)

    public var table: String {
        switch self {
        case .create(let t, _, _), .erase(let t, _), .set(let t, _, _, _), .addInteger(let t, _, _, _),
             .listInsert(let t, _, _, _, _), .listSet(let t, _, _, _, _), .listErase(let t, _, _, _), .listClear(let t, _, _):
            return t
        }
    }

    public var key: FerryValue {
        switch self {
        case .create(_, let k, _), .erase(_, let k), .set(_, let k, _, _), .addInteger(_, let k, _, _),
             .listInsert(_, let k, _, _, _), .listSet(_, let k, _, _, _), .listErase(_, let k, _, _), .listClear(_, let k, _):
            return k
        }
    }

    /// The property the instruction changes; nil for create and erase.
    public var field: String? {
        switch self {
        case .create, .erase: return nil
        case .set(_, _, let f, _), .addInteger(_, _, let f, _), .listInsert(_, _, let f, _, _),
             .listSet(_, _, let f, _, _), .listErase(_, _, let f, _), .listClear(_, _, let f):
            return f
        }
    }
}

/// A property name and a value, as a create carries them.
public struct FieldValue: Hashable, Sendable {
    public var name: String
    public var value: FerryValue
    public init(name: String, value: FerryValue) {
        self.name = name
        self.value = value
    }
}

/// Every change of one write transaction, stamped with the transaction's time (nanoseconds
/// since the Unix epoch; strictly increasing per file, so last-writer-wins has a total order).
public struct Changeset: Hashable, Sendable {
    public var timestamp: Int64
    public var instructions: [Instruction]
    public init(timestamp: Int64, instructions: [Instruction]) {
        self.timestamp = timestamp
        self.instructions = instructions
    }
}
