import FerryCore

/// Decides how a file's stored schema meets the schema a handle opens with. Additive changes
/// (new classes, new properties, index changes, dropped optional properties) become SQL; a
/// breaking change (changed type, optionality, list-ness, link target or primary key, a dropped
/// required property) is refused before anything is written.
struct SchemaMigration {
    /// What the file will store afterwards: the requested classes, plus what the file keeps
    /// without the requested schema naming it (dropped optional properties and dropped classes
    /// keep their data).
    let storedSchema: Schema
    let statements: [String]

    init(stored: Schema?, requested: Schema) throws {
        guard let stored else {
            storedSchema = requested
            statements = requested.classes.flatMap { c in
                [TableLayout.createTableSQL(c)] + c.properties.filter(\.isIndexed).map { TableLayout.createIndexSQL(c, $0) }
            }
            return
        }
        var sql: [String] = []
        var classes: [ObjectSchema] = []
        for c in requested.classes {
            guard let old = stored.objectSchema(named: c.name) else {
                sql.append(TableLayout.createTableSQL(c))
                sql += c.properties.filter(\.isIndexed).map { TableLayout.createIndexSQL(c, $0) }
                classes.append(c)
                continue
            }
            if old.isAsymmetric != c.isAsymmetric {
                throw FerryError(.schemaMismatch, "class '\(c.name)' was \(old.isAsymmetric ? "" : "not ")asymmetric in the file; changing that is a breaking change")
            }
            var props = c.properties
            for p in c.properties {
                if let was = old.property(named: p.name) {
                    guard was.type == p.type, was.isList == p.isList, was.isOptional == p.isOptional,
                          was.isPrimaryKey == p.isPrimaryKey, was.linkTarget == p.linkTarget else {
                        throw FerryError(.schemaMismatch, "property '\(c.name).\(p.name)' is \(was.typeText)\(was.isPrimaryKey ? " (primary key)" : "") in the file and \(p.typeText)\(p.isPrimaryKey ? " (primary key)" : "") in the schema; changing it is a breaking change")
                    }
                    if p.isIndexed && !was.isIndexed { sql.append(TableLayout.createIndexSQL(c, p)) }
                    if !p.isIndexed && was.isIndexed { sql.append(TableLayout.dropIndexSQL(c, p)) }
                } else {
                    let def = p.defaultValue
                    sql.append("ALTER TABLE \(TableLayout.tableName(c.name).sqlIdentifier) ADD COLUMN \(p.name.sqlIdentifier)" +
                               (def.isNull ? "" : " DEFAULT \(ColumnCodec.sqlLiteral(p.isList ? .list([]) : def))"))
                    if p.isIndexed { sql.append(TableLayout.createIndexSQL(c, p)) }
                }
            }
            for was in old.properties where c.property(named: was.name) == nil {
                guard was.isOptional && !was.isPrimaryKey else {
                    throw FerryError(.schemaMismatch, "required property '\(c.name).\(was.name)' is in the file but not in the schema; removing a required property is a breaking change")
                }
                props.append(was)
            }
            classes.append(try ObjectSchema(name: c.name, properties: props, isAsymmetric: c.isAsymmetric))
        }
        for old in stored.classes where requested.objectSchema(named: old.name) == nil { classes.append(old) }
        storedSchema = try Schema(classes)
        statements = sql
    }
}
