/// The binary form of `WriteRules` in the WRITE_RULES message (docs/protocol.md) and in the
/// device's file (the last rules it got, so the pre-flight check works offline after a
/// restart). The device decodes what a server sent: counts are bounded by the bytes left and
/// filters may nest at most `maxDepth` deep, so a hostile message is an error, never a trap
/// or a stack overflow.
public enum WriteRulesCodec {
    /// Filters nest at most this deep (rules files nest two or three levels).
    public static let maxDepth = 32

    private enum FilterTag: UInt8 { case all = 0, and, or, nor, field }
    private enum ConditionTag: UInt8 { case equal = 0, notEqual, greater, greaterOrEqual, less, lessOrEqual, `in`, notIn, exists, all }

    public static func encode(_ rules: WriteRules, into w: inout ByteWriter) {
        w.varint(UInt64(rules.classes.count))
        for c in rules.classes {
            w.string(c.objectType)
            if let role = c.role {
                w.byte(1)
                w.string(role.name)
                w.byte((role.write ? 1 : 0) | (role.insert ? 2 : 0) | (role.delete ? 4 : 0))
                if let f = role.writeFilter {
                    w.byte(1)
                    encode(f, into: &w)
                } else {
                    w.byte(0)
                }
            } else {
                w.byte(0)
            }
            w.varint(UInt64(c.queryableFields.count))
            for f in c.queryableFields { w.string(f) }
        }
    }

    public static func encode(_ rules: WriteRules) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        encode(rules, into: &w)
        return w.bytes
    }

    public static func decode(from r: inout ByteReader) throws -> WriteRules {
        var classes: [ClassWriteRules] = []
        for _ in 0..<(try r.count(minSize: 3)) {
            let type = try r.string()
            var role: Role?
            if try flag(&r) {
                let name = try r.string()
                let bits = try r.byte()
                guard bits < 8 else { throw r.corrupt("unknown role flags \(bits)") }
                let filter: DocumentFilter? = try flag(&r) ? decodeFilter(from: &r, depth: 0) : nil
                // Only what a write check reads: the write filter and the kinds of write allowed.
                role = Role(name: name, writeFilter: filter, read: false, write: bits & 1 != 0, insert: bits & 2 != 0, delete: bits & 4 != 0)
            }
            var fields: [String] = []
            for _ in 0..<(try r.count()) { fields.append(try r.string()) }
            classes.append(ClassWriteRules(objectType: type, role: role, queryableFields: fields))
        }
        return WriteRules(classes: classes)
    }

    /// Decodes rules stored or received as a whole (no trailing bytes).
    public static func decode(_ bytes: [UInt8]) throws -> WriteRules {
        var r = ByteReader(bytes)
        let rules = try decode(from: &r)
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after write rules") }
        return rules
    }

    private static func flag(_ r: inout ByteReader) throws -> Bool {
        let b = try r.byte()
        guard b <= 1 else { throw r.corrupt("a flag must be 0 or 1") }
        return b == 1
    }

    // MARK: filters

    static func encode(_ f: DocumentFilter, into w: inout ByteWriter) {
        switch f {
        case .all: w.byte(FilterTag.all.rawValue)
        case .and(let items): list(.and, items, &w)
        case .or(let items): list(.or, items, &w)
        case .nor(let items): list(.nor, items, &w)
        case let .field(name, condition):
            w.byte(FilterTag.field.rawValue)
            w.string(name)
            encode(condition, into: &w)
        }
    }

    private static func list(_ tag: FilterTag, _ items: [DocumentFilter], _ w: inout ByteWriter) {
        w.byte(tag.rawValue)
        w.varint(UInt64(items.count))
        for i in items { encode(i, into: &w) }
    }

    private static func encode(_ c: FieldCondition, into w: inout ByteWriter) {
        func one(_ tag: ConditionTag, _ o: FilterOperand) {
            w.byte(tag.rawValue)
            encode(o, into: &w)
        }
        func many(_ tag: ConditionTag, _ os: [FilterOperand]) {
            w.byte(tag.rawValue)
            w.varint(UInt64(os.count))
            for o in os { encode(o, into: &w) }
        }
        switch c {
        case .equal(let o): one(.equal, o)
        case .notEqual(let o): one(.notEqual, o)
        case .greater(let o): one(.greater, o)
        case .greaterOrEqual(let o): one(.greaterOrEqual, o)
        case .less(let o): one(.less, o)
        case .lessOrEqual(let o): one(.lessOrEqual, o)
        case .in(let os): many(.in, os)
        case .notIn(let os): many(.notIn, os)
        case .exists(let b):
            w.byte(ConditionTag.exists.rawValue)
            w.byte(b ? 1 : 0)
        case .all(let cs):
            w.byte(ConditionTag.all.rawValue)
            w.varint(UInt64(cs.count))
            for c in cs { encode(c, into: &w) }
        }
    }

    /// An operand is a value (tag 0), or a `%%user` value the user did not have (tag 1): the
    /// server expands every other one, so the device never needs the user's data.
    private static func encode(_ o: FilterOperand, into w: inout ByteWriter) {
        switch o {
        case .value(let v):
            w.byte(0)
            ValueCodec.encode(v, into: &w)
        case .user:
            w.byte(1)
        }
    }

    static func decodeFilter(from r: inout ByteReader, depth: Int) throws -> DocumentFilter {
        guard depth < maxDepth else { throw r.corrupt("a filter nested deeper than \(maxDepth) levels") }
        let raw = try r.byte()
        guard let tag = FilterTag(rawValue: raw) else { throw r.corrupt("unknown filter tag \(raw)") }
        func items() throws -> [DocumentFilter] {
            var out: [DocumentFilter] = []
            for _ in 0..<(try r.count()) { out.append(try decodeFilter(from: &r, depth: depth + 1)) }
            return out
        }
        switch tag {
        case .all: return .all
        case .and: return .and(try items())
        case .or: return .or(try items())
        case .nor: return .nor(try items())
        case .field:
            let name = try r.string()
            return .field(name, try decodeCondition(from: &r, depth: depth + 1))
        }
    }

    private static func decodeCondition(from r: inout ByteReader, depth: Int) throws -> FieldCondition {
        guard depth < maxDepth else { throw r.corrupt("a filter nested deeper than \(maxDepth) levels") }
        let raw = try r.byte()
        guard let tag = ConditionTag(rawValue: raw) else { throw r.corrupt("unknown filter condition \(raw)") }
        func operands() throws -> [FilterOperand] {
            var out: [FilterOperand] = []
            for _ in 0..<(try r.count()) { out.append(try decodeOperand(from: &r)) }
            return out
        }
        switch tag {
        case .equal: return .equal(try decodeOperand(from: &r))
        case .notEqual: return .notEqual(try decodeOperand(from: &r))
        case .greater: return .greater(try decodeOperand(from: &r))
        case .greaterOrEqual: return .greaterOrEqual(try decodeOperand(from: &r))
        case .less: return .less(try decodeOperand(from: &r))
        case .lessOrEqual: return .lessOrEqual(try decodeOperand(from: &r))
        case .in: return .in(try operands())
        case .notIn: return .notIn(try operands())
        case .exists: return .exists(try flag(&r))
        case .all:
            var out: [FieldCondition] = []
            for _ in 0..<(try r.count()) { out.append(try decodeCondition(from: &r, depth: depth + 1)) }
            return .all(out)
        }
    }

    private static func decodeOperand(from r: inout ByteReader) throws -> FilterOperand {
        switch try r.byte() {
        case 0: return .value(try ValueCodec.decode(from: &r))
        case 1: return .unresolved
        case let b: throw r.corrupt("unknown filter operand \(b)")
        }
    }
}
