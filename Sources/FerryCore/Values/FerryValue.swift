/// One value of any property type, or a list of them. Strings compare by their UTF-8 bytes (as
/// Realm and SQLite do), so every component that orders strings agrees.
public enum FerryValue: Hashable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case binary([UInt8])
    case timestamp(Timestamp)
    case objectId(ObjectId)
    case uuid(FerryUUID)
    case list([FerryValue])

    /// The property type this value has, nil for null and lists.
    public var type: PropertyType? {
        switch self {
        case .null, .list: return nil
        case .bool: return .bool
        case .int: return .int
        case .double: return .double
        case .string: return .string
        case .binary: return .binary
        case .timestamp: return .timestamp
        case .objectId: return .objectId
        case .uuid: return .uuid
        }
    }

    public var isNull: Bool { if case .null = self { return true } else { return false } }

    /// The zero value of a type: what a required property holds when nothing was given.
    public static func zero(of type: PropertyType) -> FerryValue {
        switch type {
        case .bool: return .bool(false)
        case .int: return .int(0)
        case .double: return .double(0)
        case .string: return .string("")
        case .binary: return .binary([])
        case .timestamp: return .timestamp(.epoch)
        case .objectId: return .objectId(ObjectId(tuple: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .uuid: return .uuid(FerryUUID.nilUUID)
        case .link: return .null
        }
    }

    /// A short human-readable form, for error messages and logs.
    public var debugText: String {
        switch self {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        case .double(let d): return String(d)
        case .string(let s): return "\"\(s)\""
        case .binary(let b): return "binary(\(b.count) bytes)"
        case .timestamp(let t): return "T\(t.seconds):\(t.nanoseconds)"
        case .objectId(let o): return "oid(\(o))"
        case .uuid(let u): return "uuid(\(u))"
        case .list(let l): return "[" + l.map(\.debugText).joined(separator: ", ") + "]"
        }
    }

    /// The text of a primary key as the seeds print it in messages (`write to "<pk>" ...`).
    public var keyText: String {
        switch self {
        case .string(let s): return s
        case .objectId(let o): return o.description
        case .uuid(let u): return u.description
        case .int(let i): return String(i)
        default: return debugText
        }
    }
}

extension FerryValue {
    /// Ferry's total order inside one type, used for comparisons, SORT and pushdown: numbers
    /// numerically (int against double too), strings and binaries by bytes, nulls first.
    /// Returns nil when the two values cannot be ordered against each other.
    public static func compare(_ a: FerryValue, _ b: FerryValue) -> Int? {
        switch (a, b) {
        case (.null, .null): return 0
        case (.null, _): return -1
        case (_, .null): return 1
        case let (.int(x), .int(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.double(x), .double(y)): return compareDoubles(x, y)
        case let (.int(x), .double(y)): return compareIntToDouble(x, y)
        case let (.double(x), .int(y)): return -compareIntToDouble(y, x)
        case let (.bool(x), .bool(y)): return x == y ? 0 : (x ? 1 : -1)
        case let (.string(x), .string(y)): return compareUTF8(x, y)
        case let (.binary(x), .binary(y)): return x.withUnsafeBufferPointer { px in y.withUnsafeBufferPointer { py in compareBuffers(px, py) } }
        case let (.timestamp(x), .timestamp(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.objectId(x), .objectId(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.uuid(x), .uuid(y)): return x < y ? -1 : (x == y ? 0 : 1)
        default: return nil
        }
    }

    /// Equality as queries see it: int 4 equals double 4.0, NaN equals nothing.
    public static func queryEquals(_ a: FerryValue, _ b: FerryValue) -> Bool {
        if case .double(let x) = a, x.isNaN { return false }
        if case .double(let y) = b, y.isNaN { return false }
        return compare(a, b) == 0
    }
}

/// NaN sorts before every number so SORT is total; comparisons in queries treat NaN as unequal.
func compareDoubles(_ x: Double, _ y: Double) -> Int {
    if x.isNaN || y.isNaN { return x.isNaN ? (y.isNaN ? 0 : -1) : 1 }
    return x < y ? -1 : (x == y ? 0 : 1)
}

/// Exact comparison of an int with a double (no rounding of large ints), as SQLite does it, so
/// that pushed-down SQL conditions and the Swift evaluator agree. NaN sorts before numbers.
func compareIntToDouble(_ x: Int64, _ y: Double) -> Int {
    if y.isNaN { return 1 }
    if y >= 9_223_372_036_854_775_808.0 { return -1 }
    if y < -9_223_372_036_854_775_808.0 { return 1 }
    let t = y.rounded(.down)
    let ti = Int64(t)
    if x != ti { return x < ti ? -1 : 1 }
    return t == y ? 0 : -1
}

/// Two strings by their UTF-8 bytes, on their contiguous storage: every permission filter
/// and query condition on a string comes here (an iterator over `utf8` cost about 2,000
/// instructions per comparison, issue 23).
func compareUTF8(_ a: String, _ b: String) -> Int {
    var a = a, b = b
    return a.withUTF8 { pa in b.withUTF8 { pb in compareBuffers(pa, pb) } }
}

func compareBuffers(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
    let n = min(a.count, b.count)
    var i = 0
    while i < n {
        let x = a[i], y = b[i]
        if x != y { return x < y ? -1 : 1 }
        i += 1
    }
    return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
}

