import FerryCore
import FerrySQLite

/// The SQL of one class: its table, its statements, the order of its columns (the order of
/// the class's properties). Tables are named `class_<Name>` so a class can never clash with
/// SQLite's or Ferry's own tables. A class, so the hot paths borrow it instead of copying.
final class TableLayout {
    let objectSchema: ObjectSchema
    let classIndex: Int
    /// `objectSchema.primaryKeyIndex`, kept apart so hot paths read an Int, not a struct.
    let primaryKeyIndex: Int
    /// What each property holds in a new object that does not give it a value.
    let defaults: [FerryValue]
    /// Per property, what a value must be: checked on every write without copying `Property`.
    let kinds: [PropertyKind]
    /// Keys of this class's statements in `SQLiteConnection.statement(key:)`.
    var insertKey: Int { classIndex << 16 | 1 }
    var selectKey: Int { classIndex << 16 | 2 }
    var deleteKey: Int { classIndex << 16 | 3 }
    var upsertKey: Int { classIndex << 16 | 4 }
    var rowidKey: Int { classIndex << 16 | 5 }
    func updateKey(_ property: Int) -> Int { classIndex << 16 | 0x8000 | property }
    let table: String
    let selectColumns: String
    let insertSQL: String
    let selectByKeySQL: String
    let deleteSQL: String
    /// Inserts or overwrites a whole object, keeping its row (and so its place in unsorted
    /// results) when it exists: how sync integrates a downloaded object.
    let upsertSQL: String
    let primaryKeyColumn: String

    init(_ objectSchema: ObjectSchema, classIndex: Int) {
        self.objectSchema = objectSchema
        self.classIndex = classIndex
        primaryKeyIndex = objectSchema.primaryKeyIndex
        defaults = objectSchema.properties.map(\.defaultValue)
        kinds = objectSchema.properties.map(PropertyKind.init)
        table = Self.tableName(objectSchema.name).sqlIdentifier
        let cols = objectSchema.properties.map(\.name.sqlIdentifier)
        selectColumns = cols.joined(separator: ", ")
        primaryKeyColumn = objectSchema.primaryKey.name.sqlIdentifier
        insertSQL = "INSERT INTO \(table) (\(selectColumns)) VALUES (\(cols.map { _ in "?" }.joined(separator: ", ")))"
        selectByKeySQL = "SELECT \(selectColumns) FROM \(table) WHERE \(primaryKeyColumn) = ?"
        deleteSQL = "DELETE FROM \(table) WHERE \(primaryKeyColumn) = ?"
        let others = objectSchema.properties.filter { !$0.isPrimaryKey }.map { "\($0.name.sqlIdentifier) = excluded.\($0.name.sqlIdentifier)" }
        upsertSQL = insertSQL + " ON CONFLICT(\(primaryKeyColumn)) DO " + (others.isEmpty ? "NOTHING" : "UPDATE SET " + others.joined(separator: ", "))
    }

    static func tableName(_ className: String) -> String { "class_" + className }
    static func indexName(_ className: String, _ property: String) -> String { "index_\(className)_\(property)" }

    func updateSQL(_ property: Int) -> String {
        "UPDATE \(table) SET \(objectSchema.properties[property].name.sqlIdentifier) = ? WHERE \(primaryKeyColumn) = ?"
    }

    static func createTableSQL(_ c: ObjectSchema) -> String {
        let cols = c.properties.map { p in p.isPrimaryKey ? "\(p.name.sqlIdentifier) PRIMARY KEY NOT NULL" : p.name.sqlIdentifier }
        return "CREATE TABLE \(tableName(c.name).sqlIdentifier) (\(cols.joined(separator: ", ")))"
    }

    static func createIndexSQL(_ c: ObjectSchema, _ p: Property) -> String {
        "CREATE INDEX IF NOT EXISTS \(indexName(c.name, p.name).sqlIdentifier) ON \(tableName(c.name).sqlIdentifier) (\(p.name.sqlIdentifier))"
    }

    static func dropIndexSQL(_ c: ObjectSchema, _ p: Property) -> String {
        "DROP INDEX IF EXISTS \(indexName(c.name, p.name).sqlIdentifier)"
    }

    /// Reads one row selected with `selectColumns` into values in schema order.
    func readRow(_ s: Statement, offset: Int32 = 0) throws -> [FerryValue] {
        var values: [FerryValue] = []
        values.reserveCapacity(objectSchema.properties.count)
        for (i, p) in objectSchema.properties.enumerated() { values.append(try ColumnCodec.read(s, offset + Int32(i), p)) }
        return values
    }
}

/// The facts about a property that value checks need, as a plain value (no references), so
/// hot paths copy it for free.
struct PropertyKind {
    let valueType: PropertyType
    let isList: Bool
    let acceptsNull: Bool
    let isPrimaryKey: Bool

    init(_ p: Property) {
        valueType = p.valueType
        isList = p.isList
        acceptsNull = !p.isList && (p.isOptional || p.type == .link)
        isPrimaryKey = p.isPrimaryKey
    }

    /// Whether a borrowed single value fits.
    func accepts(_ v: BorrowedValue) -> Bool {
        if case .null = v { return acceptsNull }
        return v.type == valueType
    }
}
