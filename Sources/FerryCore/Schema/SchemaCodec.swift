/// The binary form of a schema, as a database file stores it (and sync will compare it).
public enum SchemaCodec {
    static let version: UInt8 = 1

    public static func encode(_ schema: Schema) -> [UInt8] {
        var w = ByteWriter()
        w.byte(version)
        w.varint(UInt64(schema.classes.count))
        for c in schema.classes {
            w.string(c.name)
            w.byte(c.isAsymmetric ? 1 : 0)
            w.varint(UInt64(c.properties.count))
            for p in c.properties {
                w.string(p.name)
                w.byte(UInt8(p.type.rawValue))
                w.byte((p.isOptional ? 1 : 0) | (p.isPrimaryKey ? 2 : 0) | (p.isIndexed ? 4 : 0) | (p.isList ? 8 : 0))
                w.string(p.linkTarget ?? "")
            }
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws -> Schema {
        var r = ByteReader(bytes)
        guard try r.byte() == version else { throw r.corrupt("unknown schema version") }
        var classes: [ObjectSchema] = []
        for _ in 0..<(try r.count()) {
            let name = try r.string()
            let asymmetric = try r.byte() == 1
            var props: [Property] = []
            for _ in 0..<(try r.count()) {
                let pname = try r.string()
                guard let type = PropertyType(rawValue: Int32(try r.byte())) else { throw r.corrupt("unknown property type") }
                let flags = try r.byte()
                let target = try r.string()
                props.append(Property(name: pname, type: type, isOptional: flags & 1 != 0, isPrimaryKey: flags & 2 != 0,
                                      isIndexed: flags & 4 != 0, isList: flags & 8 != 0, linkTarget: target.isEmpty ? nil : target))
            }
            do {
                classes.append(try ObjectSchema(name: name, properties: props, isAsymmetric: asymmetric))
            } catch let e as FerryError {
                throw FerryError(.corrupt, "stored schema is invalid: \(e.message)")
            }
        }
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after the schema") }
        do { return try Schema(classes) } catch let e as FerryError { throw FerryError(.corrupt, "stored schema is invalid: \(e.message)") }
    }
}
