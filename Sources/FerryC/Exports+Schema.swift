import CFerry
import FerryCore

/// The object behind a `ferry_schema_t *`.
final class SchemaHandle {
    let schema: Schema
    init(_ schema: Schema) { self.schema = schema }
}

private let knownPropertyFlags: UInt32 = 1 | 2 | 4 | 8

@c @implementation
public func ferry_schema_new(_ out: UnsafeMutablePointer<OpaquePointer?>!, _ classes: UnsafePointer<ferry_class_info_t>!, _ count: Int) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        guard count >= 0 && count <= 10_000 else { throw FerryError(.invalidArgument, "class_count \(count) is out of range") }
        guard count == 0 || classes != nil else { throw FerryError(.invalidArgument, "classes is NULL but class_count is \(count)") }
        var objectSchemas: [ObjectSchema] = []
        for i in 0..<count {
            let c = classes[i]
            guard let cname = c.name else { throw FerryError(.invalidArgument, "classes[\(i)].name is NULL") }
            guard let name = String(validatingCString: cname) else { throw FerryError(.invalidSchema, "class \(i)'s name is not valid UTF-8") }
            guard c.flags & ~UInt32(1) == 0 else { throw FerryError(.invalidSchema, "class '\(name)' has unknown flags \(c.flags)") }
            guard c.property_count <= 1_000 else { throw FerryError(.invalidSchema, "class '\(name)' has too many properties (\(c.property_count))") }
            guard c.property_count == 0 || c.properties != nil else { throw FerryError(.invalidArgument, "class '\(name)' has NULL properties but property_count \(c.property_count)") }
            var props: [Property] = []
            for j in 0..<c.property_count {
                let p = c.properties[j]
                guard let pn = p.name else { throw FerryError(.invalidArgument, "property \(j) of class '\(name)' has a NULL name") }
                guard let pname = String(validatingCString: pn) else {
                    throw FerryError(.invalidSchema, "property \(j) of class '\(name)' has a name that is not UTF-8")
                }
                guard let type = PropertyType(rawValue: p.type) else {
                    throw FerryError(.invalidSchema, "property '\(name).\(pname)' has unknown type \(p.type)")
                }
                guard p.flags & ~knownPropertyFlags == 0 else { throw FerryError(.invalidSchema, "property '\(name).\(pname)' has unknown flags \(p.flags)") }
                var target: String?
                if let t = p.link_target {
                    guard let s = String(validatingCString: t) else { throw FerryError(.invalidSchema, "link target of '\(name).\(pname)' is not valid UTF-8") }
                    target = s
                }
                props.append(Property(name: pname, type: type, isOptional: p.flags & 1 != 0, isPrimaryKey: p.flags & 2 != 0,
                                      isIndexed: p.flags & 4 != 0, isList: p.flags & 8 != 0, linkTarget: target))
            }
            objectSchemas.append(try ObjectSchema(name: name, properties: props, isAsymmetric: c.flags & 1 != 0))
        }
        let schema = try Schema(objectSchemas)
        out.pointee = HandleTable.shared.register(SchemaHandle(schema), kind: .schema)
    }
}

@c @implementation
public func ferry_schema_free(_ schema: OpaquePointer!) {
    _ = HandleTable.shared.remove(schema, .schema, as: SchemaHandle.self)
}
