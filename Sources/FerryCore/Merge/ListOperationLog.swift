/// The recent list operations of one object, kept by the server so an uploaded list operation
/// can be moved past the ones its client had not seen (operational transformation by position).
/// Bounded: the oldest entries are dropped past `limit`; an operation older than everything
/// kept is applied at its index as it stands.
public struct ListOperationLog: Sendable, Equatable {
    public enum Operation: Sendable, Equatable {
        case insert(Int), erase(Int), set(Int), clear
    }
    public struct Entry: Sendable, Equatable {
        public var property: Int
        public var version: UInt64
        public var origin: UInt64
        public var operation: Operation
    }
    public private(set) var entries: [Entry] = []
    public static let limit = 256

    public init(entries: [Entry] = []) { self.entries = entries }

    public mutating func record(_ op: Operation, property: Int, version: UInt64, origin: UInt64) {
        entries.append(Entry(property: property, version: version, origin: origin, operation: op))
        if entries.count > Self.limit { entries.removeFirst(entries.count - Self.limit) }
    }

    /// Moves the operations recorded at server version `provisional` to `version` (see
    /// `StampedObject.restamp`).
    public mutating func restamp(_ provisional: UInt64, to version: UInt64) {
        for i in entries.indices where entries[i].version == provisional { entries[i].version = version }
    }

    /// The index `op` should apply at after the operations on `property` that came after
    /// `base` from other clients; nil when a concurrent operation removed its target (an
    /// erase or set of an erased element, anything before a concurrent clear).
    public func transform(_ op: Operation, property: Int, base: UInt64, origin: UInt64) -> Int? {
        var index: Int
        switch op {
        case .insert(let i), .erase(let i), .set(let i): index = i
        case .clear: return 0
        }
        let isInsert: Bool = { if case .insert = op { return true } else { return false } }()
        for e in entries where e.property == property && e.version > base && e.origin != origin {
            switch e.operation {
            case .insert(let j):
                // Ties between concurrent inserts at one index: the lower file ident goes first.
                if j < index || (j == index && (!isInsert || e.origin < origin)) { index += 1 }
            case .erase(let j):
                if j < index { index -= 1 } else if j == index && !isInsert { return nil }
            case .set: break
            case .clear:
                if !isInsert { return nil }
                index = 0
            }
        }
        return index
    }

    // MARK: storage form

    public func encode(into w: inout ByteWriter) {
        w.varint(UInt64(entries.count))
        for e in entries {
            w.varint(UInt64(e.property)); w.varint(e.version); w.varint(e.origin)
            switch e.operation {
            case .insert(let i): w.byte(0); w.varint(UInt64(i))
            case .erase(let i): w.byte(1); w.varint(UInt64(i))
            case .set(let i): w.byte(2); w.varint(UInt64(i))
            case .clear: w.byte(3)
            }
        }
    }

    public static func decode(from r: inout ByteReader) throws -> ListOperationLog {
        let n = try r.count(minSize: 4)
        var log = ListOperationLog()
        for _ in 0..<n {
            let p = try r.varint(), v = try r.varint(), o = try r.varint()
            guard p < 4096 else { throw FerryError(.corrupt, "a list operation names property \(p)") }
            let op: Operation
            switch try r.byte() {
            case 0: op = .insert(Int(clamping: try r.varint()))
            case 1: op = .erase(Int(clamping: try r.varint()))
            case 2: op = .set(Int(clamping: try r.varint()))
            case 3: op = .clear
            default: throw FerryError(.corrupt, "unknown list operation")
            }
            log.entries.append(Entry(property: Int(p), version: v, origin: o, operation: op))
        }
        return log
    }
}
