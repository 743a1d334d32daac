import FerryCore

extension AppDirectory {
    /// A collection's JSON schema (`bsonType`s) as an object schema. Properties listed in
    /// `required` are required; the others optional; `_id` is the primary key.
    static func schema(_ o: [String: Any], collection: String, asymmetric: Bool, _ file: String) throws -> ObjectSchema {
        let title = (o["title"] as? String) ?? collection
        guard let properties = o["properties"] as? [String: Any] else {
            throw AppConfigurationError(file: file, "'properties' must be an object")
        }
        let required = Set((o["required"] as? [String]) ?? [])
        guard properties["_id"] != nil else { throw AppConfigurationError(file: file, "the schema has no '_id' property") }
        var props: [Property] = []
        for (name, raw) in properties.sorted(by: { ($0.key == "_id" ? "" : $0.key) < ($1.key == "_id" ? "" : $1.key) }) {
            guard let p = raw as? [String: Any] else { throw AppConfigurationError(file: file, "property '\(name)' is not an object") }
            let bsonType = try bsonTypeName(p, name, file)
            let isPK = name == "_id"
            if bsonType == "array" {
                guard let items = p["items"] as? [String: Any] else {
                    throw AppConfigurationError(file: file, "array property '\(name)' needs 'items' with a bsonType")
                }
                props.append(Property(name: name, type: try propertyType(try bsonTypeName(items, name + ".items", file), name, file), isList: true))
            } else {
                props.append(Property(name: name, type: try propertyType(bsonType, name, file),
                                      isOptional: !isPK && !required.contains(name), isPrimaryKey: isPK))
            }
        }
        do { return try ObjectSchema(name: title, properties: props, isAsymmetric: asymmetric) } catch let e as FerryError {
            throw AppConfigurationError(file: file, e.message)
        }
    }

    private static func bsonTypeName(_ p: [String: Any], _ name: String, _ file: String) throws -> String {
        if let t = p["bsonType"] as? String { return t }
        // ["string", "null"] marks an optional value; the nullability comes from `required`.
        if let ts = p["bsonType"] as? [String], let t = ts.first(where: { $0 != "null" }) { return t }
        throw AppConfigurationError(file: file, "property '\(name)' has no bsonType")
    }

    private static func propertyType(_ bsonType: String, _ name: String, _ file: String) throws -> PropertyType {
        switch bsonType {
        case "objectId": return .objectId
        case "string": return .string
        case "long", "int": return .int
        case "double", "decimal": return .double
        case "bool": return .bool
        case "date": return .timestamp
        case "binData": return .binary
        case "uuid": return .uuid
        default: throw AppConfigurationError(file: file, "property '\(name)' has bsonType '\(bsonType)', which Ferry does not support")
        }
    }
}
