import FerryCore

extension AppDirectory {
    /// A `rules.json` (or `default_rule.json`): `{ "roles": [ ... ] }`.
    static func rules(_ o: [String: Any], _ file: String) throws -> CollectionRules {
        guard let roles = o["roles"] as? [Any] else { throw AppConfigurationError(file: file, "'roles' must be a list") }
        return CollectionRules(roles: try roles.enumerated().map { i, raw in
            guard let r = raw as? [String: Any] else { throw AppConfigurationError(file: file, "role \(i) is not an object") }
            let name = (r["name"] as? String) ?? "role \(i)"
            let where_ = "role '\(name)'"
            let filters = (r["document_filters"] as? [String: Any]) ?? [:]
            return Role(
                name: name,
                applyWhen: try filter(r["apply_when"] ?? [String: Any](), "\(where_) apply_when", file),
                readFilter: try filters["read"].map { try filter($0, "\(where_) document_filters.read", file) },
                writeFilter: try filters["write"].map { try filter($0, "\(where_) document_filters.write", file) },
                read: try flag(r["read"], "\(where_) read", file), write: try flag(r["write"], "\(where_) write", file),
                insert: try flag(r["insert"] ?? true, "\(where_) insert", file), delete: try flag(r["delete"] ?? true, "\(where_) delete", file))
        })
    }

    /// `read`/`write` may be a boolean or a filter expression; Ferry takes booleans (a filter
    /// belongs in `document_filters`).
    private static func flag(_ v: Any?, _ what: String, _ file: String) throws -> Bool {
        guard let v else { return false }
        guard let b = v as? Bool else { throw AppConfigurationError(file: file, "\(what) must be true or false; put filters in document_filters") }
        return b
    }

    /// A MongoDB-style filter document.
    static func filter(_ v: Any, _ what: String, _ file: String) throws -> DocumentFilter {
        if let b = v as? Bool { return b ? .all : .nor([.all]) }
        guard let o = v as? [String: Any] else { throw AppConfigurationError(file: file, "\(what) must be a filter object") }
        var parts: [DocumentFilter] = []
        for (key, value) in o.sorted(by: { $0.key < $1.key }) {
            switch key {
            case "$and", "$or", "$nor":
                guard let list = value as? [Any], !list.isEmpty else { throw AppConfigurationError(file: file, "\(what): \(key) needs a non-empty list") }
                let items = try list.map { try filter($0, what, file) }
                parts.append(key == "$and" ? .and(items) : key == "$or" ? .or(items) : .nor(items))
            case let k where k.hasPrefix("$"):
                throw AppConfigurationError(file: file, "\(what): operator \(k) is not supported at the top of a filter")
            default:
                parts.append(.field(key, try condition(value, "\(what) field '\(key)'", file)))
            }
        }
        return parts.isEmpty ? .all : parts.count == 1 ? parts[0] : .and(parts)
    }

    private static func condition(_ v: Any, _ what: String, _ file: String) throws -> FieldCondition {
        guard let o = v as? [String: Any], let first = o.keys.first, first.hasPrefix("$") else {
            return .equal(try operand(v, what, file))
        }
        var conditions: [FieldCondition] = []
        for (op, arg) in o.sorted(by: { $0.key < $1.key }) {
            switch op {
            case "$eq": conditions.append(.equal(try operand(arg, what, file)))
            case "$ne": conditions.append(.notEqual(try operand(arg, what, file)))
            case "$gt": conditions.append(.greater(try operand(arg, what, file)))
            case "$gte": conditions.append(.greaterOrEqual(try operand(arg, what, file)))
            case "$lt": conditions.append(.less(try operand(arg, what, file)))
            case "$lte": conditions.append(.lessOrEqual(try operand(arg, what, file)))
            case "$in", "$nin":
                guard let list = arg as? [Any] else { throw AppConfigurationError(file: file, "\(what): \(op) needs a list") }
                let operands = try list.map { try operand($0, what, file) }
                conditions.append(op == "$in" ? .in(operands) : .notIn(operands))
            case "$exists":
                guard let b = arg as? Bool else { throw AppConfigurationError(file: file, "\(what): $exists needs true or false") }
                conditions.append(.exists(b))
            default:
                throw AppConfigurationError(file: file, "\(what): operator \(op) is not supported")
            }
        }
        return conditions.count == 1 ? conditions[0] : .all(conditions)
    }

    /// A literal or a `%%user...` expansion. Extended JSON `{"$oid": "..."}` is an ObjectId.
    private static func operand(_ v: Any, _ what: String, _ file: String) throws -> FilterOperand {
        if let s = v as? String, s.hasPrefix("%%user.") { return .user(path: String(s.dropFirst(7))) }
        if let s = v as? String, s.hasPrefix("%%") {
            throw AppConfigurationError(file: file, "\(what): expansion \(s) is not supported (only %%user.id, %%user.data.*, %%user.custom_data.*)")
        }
        switch try json(v, file) {
        case .null: return .value(.null)
        case .bool(let b): return .value(.bool(b))
        case .int(let i): return .value(.int(i))
        case .double(let d): return .value(.double(d))
        case .string(let s): return .value(.string(s))
        case .object(let o):
            // Not 24 hex digits: the object is not an ObjectId literal, and is read as a document.
            if o.count == 1, case .string(let hex)? = JSON.object(o)["$oid"], let oid = try? ObjectId(hex: hex) { return .value(.objectId(oid)) }
            throw AppConfigurationError(file: file, "\(what): only {\"$oid\": ...} is supported as an object value")
        case .array:
            throw AppConfigurationError(file: file, "\(what): a list is not a value here; use $in")
        }
    }
}
