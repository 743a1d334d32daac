/// The merge rules, applied by the server to every uploaded instruction (docs/protocol.md,
/// "Merge"). The server's state is the reference: it sends the merged objects back to every
/// client that sees them, the uploader included, so all replicas converge on what these rules
/// decide.
///
/// Instructions apply in the order the server receives them: a client file's changesets in the
/// order it made them, a changeset's instructions in their order, all with the changeset's
/// stamp.
/// - A set replaces the value when it comes after the write that set it (`Stamp.supersedes`):
///   that write was the same client file's (an earlier instruction or changeset), or the
///   writer had integrated it. Between concurrent writes, the later `Stamp` wins (timestamp,
///   then client file ident).
/// - An erase wins over concurrent sets: a set on an object that no longer exists is dropped.
/// - Integer adds commute; an add concurrent with a newer set (one the adding client had not
///   seen) is dropped, since the set decided the value after it.
/// - Creates with the same primary key merge field by field, by the rule of sets.
/// - List inserts and erases are transformed by position against the concurrent list operations
///   the object recorded (`ListOperationLog`).
public enum ObjectMerge {
    /// What an instruction did to the object.
    public enum Outcome: Sendable, Equatable {
        /// Nothing (an older set, an operation on an erased object or element).
        case unchanged
        /// Applied exactly as the client made it.
        case applied
        /// Applied, but not as the client made it (a list index moved past concurrent
        /// operations, or clamped): the client must be sent the result.
        case adjusted

        public var changed: Bool { self != .unchanged }
    }

    /// Applies one instruction from a client at `stamp` that had integrated server version
    /// `base`, as part of server version `version`. Returns whether the object changed. Throws
    /// for an instruction that does not fit the schema (a hostile or broken client).
    @discardableResult
    public static func apply(_ instruction: Instruction, to object: inout StampedObject?, schema os: ObjectSchema,
                             stamp: Stamp, base: UInt64, version: UInt64, lists: inout ListOperationLog) throws -> Outcome {
        func property(_ name: String) throws -> Int {
            guard let i = os.propertyIndex(named: name), i != os.primaryKeyIndex else {
                throw FerryError(.noSuchProperty, "class '\(os.name)' has no writable property '\(name)'")
            }
            return i
        }
        func check(_ p: Property, _ value: FerryValue) throws {
            if p.isList {
                guard case .list(let items) = value else { throw FerryError(.wrongType, "property '\(os.name).\(p.name)' is a list") }
                for e in items { try p.validateElement(e, className: os.name) }
            } else {
                try p.validateElement(value, className: os.name)
            }
        }
        func listIndex(_ p: Int) throws {
            guard os.properties[p].isList else { throw FerryError(.wrongType, "property '\(os.name).\(os.properties[p].name)' is not a list") }
        }
        try os.primaryKey.validateElement(instruction.key, className: os.name)
        switch instruction {
        case let .create(_, key, fields):
            var given: [(Int, FerryValue)] = []
            for f in fields {
                let p = try property(f.name)
                try check(os.properties[p], f.value)
                given.append((p, f.value))
            }
            guard var o = object else {
                object = StampedObject(schema: os, key: key, fields: fields, stamp: stamp, version: version)
                // A new life for the key: list operations of an erased object no longer apply.
                lists = ListOperationLog()
                return .applied
            }
            var changed = false, all = true
            for (p, v) in given {
                guard stamp.supersedes(o.stamps[p], writtenAt: o.versions[p], base: base) else { all = false; continue }
                o.values[p] = v; o.stamps[p] = stamp; o.versions[p] = version
                changed = true
            }
            object = o
            // A create of an existing object merges into it: the client did not have the
            // properties it did not give, so it is sent the result.
            return !changed ? .unchanged : (all && given.count == os.properties.count - 1 ? .applied : .adjusted)
        case .erase:
            guard object != nil else { return .unchanged }
            object = nil
            lists = ListOperationLog()
            return .applied
        case let .set(_, _, field, value):
            let p = try property(field)
            try check(os.properties[p], value)
            guard var o = object, stamp.supersedes(o.stamps[p], writtenAt: o.versions[p], base: base) else { return .unchanged }
            o.values[p] = value; o.stamps[p] = stamp; o.versions[p] = version
            object = o
            return .applied
        case let .addInteger(_, _, field, delta):
            let p = try property(field)
            guard os.properties[p].type == .int, !os.properties[p].isList else {
                throw FerryError(.wrongType, "property '\(os.name).\(field)' is not an int")
            }
            guard var o = object else { return .unchanged }
            // Dropped when concurrent with a newer set: the set decided the value after it.
            guard stamp.supersedes(o.stamps[p], writtenAt: o.versions[p], base: base) else { return .unchanged }
            let current: Int64
            if case .int(let v) = o.values[p] { current = v } else { current = 0 }
            o.values[p] = .int(current &+ delta)
            o.versions[p] = version
            object = o
            return .applied
        case let .listInsert(_, _, field, index, value):
            let p = try property(field)
            try listIndex(p)
            try os.properties[p].validateElement(value, className: os.name)
            guard var o = object, case .list(var items) = o.values[p] else { return .unchanged }
            guard let at = lists.transform(.insert(index), property: p, base: base, origin: stamp.fileIdent) else { return .unchanged }
            let i = min(max(at, 0), items.count)
            items.insert(value, at: i)
            lists.record(.insert(i), property: p, version: version, origin: stamp.fileIdent)
            o.values[p] = .list(items); o.versions[p] = version
            object = o
            return i == index ? .applied : .adjusted
        case let .listSet(_, _, field, index, value):
            let p = try property(field)
            try listIndex(p)
            try os.properties[p].validateElement(value, className: os.name)
            guard var o = object, case .list(var items) = o.values[p] else { return .unchanged }
            guard let at = lists.transform(.set(index), property: p, base: base, origin: stamp.fileIdent),
                  at >= 0, at < items.count else { return .unchanged }
            items[at] = value
            lists.record(.set(at), property: p, version: version, origin: stamp.fileIdent)
            o.values[p] = .list(items); o.versions[p] = version
            object = o
            return at == index ? .applied : .adjusted
        case let .listErase(_, _, field, index):
            let p = try property(field)
            try listIndex(p)
            guard var o = object, case .list(var items) = o.values[p] else { return .unchanged }
            guard let at = lists.transform(.erase(index), property: p, base: base, origin: stamp.fileIdent),
                  at >= 0, at < items.count else { return .unchanged }
            items.remove(at: at)
            lists.record(.erase(at), property: p, version: version, origin: stamp.fileIdent)
            o.values[p] = .list(items); o.versions[p] = version
            object = o
            return at == index ? .applied : .adjusted
        case let .listClear(_, _, field):
            let p = try property(field)
            try listIndex(p)
            guard var o = object else { return .unchanged }
            o.values[p] = .list([]); o.versions[p] = version
            lists.record(.clear, property: p, version: version, origin: stamp.fileIdent)
            object = o
            return .applied
        }
    }
}
