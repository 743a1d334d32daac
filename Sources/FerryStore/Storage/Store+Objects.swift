import FerryCore
import FerrySQLite

/// Row-level access to the class tables. Every function takes the connection to use: the
/// writer inside a write transaction, the reader otherwise.
extension Store {
    func layout(_ classIndex: Int) -> TableLayout { layouts[classIndex] }

    func classIndex(named name: String) throws -> Int {
        guard let i = schema.classIndex(named: name) else { throw FerryError(.noSuchClass, "no class named '\(name)'") }
        return i
    }

    func readRow(_ c: SQLiteConnection, _ classIndex: Int, key: FerryValue) throws -> [FerryValue]? {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.selectKey, l.selectByKeySQL)
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        ColumnCodec.bind(key, to: s, at: 1)
        guard try s.step() else { return nil }
        return try l.readRow(s)
    }

    func insertRow(_ c: SQLiteConnection, _ classIndex: Int, _ values: [FerryValue]) throws {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.insertKey, l.insertSQL)
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        for (i, v) in values.enumerated() { ColumnCodec.bind(v, to: s, at: Int32(i + 1)) }
        do {
            try s.run()
        } catch let e as FerryError where e.code == .duplicatePrimaryKey {
            throw FerryError(.duplicatePrimaryKey, "an object of class '\(l.objectSchema.name)' with primary key \(values[l.objectSchema.primaryKeyIndex].debugText) already exists")
        }
    }

    /// Inserts a row from borrowed values; properties not in `given` get their defaults.
    func insertRow(_ c: SQLiteConnection, _ l: TableLayout, given: UInt64, _ values: UnsafeBufferPointer<(Int, BorrowedValue)>) throws {
        let s = try c.statement(key: l.insertKey, l.insertSQL)
        defer { s.resetKeepingBindings() }
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        for (i, v) in values { ColumnCodec.bind(v, to: s, at: Int32(i + 1)) }
        for (i, d) in l.defaults.enumerated() where given & (UInt64(1) << UInt64(i)) == 0 {
            ColumnCodec.bind(d, to: s, at: Int32(i + 1))
        }
        do {
            try s.run()
        } catch let e as FerryError where e.code == .duplicatePrimaryKey {
            let key = values.first { $0.0 == l.primaryKeyIndex }?.1.value ?? .null
            throw FerryError(.duplicatePrimaryKey, "an object of class '\(l.objectSchema.name)' with primary key \(key.debugText) already exists")
        }
    }

    /// The SQLite rowid of an object (its insertion order), or nil.
    func rowid(_ c: SQLiteConnection, _ classIndex: Int, key: FerryValue) throws -> Int64? {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.rowidKey, "SELECT rowid FROM \(l.table) WHERE \(l.primaryKeyColumn) = ?")
        defer { s.resetKeepingBindings() }
        ColumnCodec.bind(key, to: s, at: 1)
        return try s.step() ? s.int64(0) : nil
    }

    /// Writes a whole object (sync integration): inserted, or overwritten in place.
    func upsertRow(_ c: SQLiteConnection, _ classIndex: Int, _ values: [FerryValue]) throws {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.upsertKey, l.upsertSQL)
        defer { s.resetKeepingBindings() }
        for (i, v) in values.enumerated() { ColumnCodec.bind(v, to: s, at: Int32(i + 1)) }
        try s.run()
    }

    /// Deletes an object if it exists; returns whether it did.
    func deleteRowIfExists(_ c: SQLiteConnection, _ classIndex: Int, key: FerryValue) throws -> Bool {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.deleteKey, l.deleteSQL)
        defer { s.resetKeepingBindings() }
        ColumnCodec.bind(key, to: s, at: 1)
        try s.run()
        return s.changes > 0
    }

    func updateColumn(_ c: SQLiteConnection, _ classIndex: Int, key: FerryValue, property: Int, value: FerryValue) throws {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.updateKey(property), l.updateSQL(property))
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        ColumnCodec.bind(value, to: s, at: 1)
        ColumnCodec.bind(key, to: s, at: 2)
        try s.run()
        guard s.changes > 0 else { throw notFound(classIndex, key) }
    }

    func deleteRow(_ c: SQLiteConnection, _ classIndex: Int, key: FerryValue) throws {
        let l = layouts[classIndex]
        let s = try c.statement(key: l.deleteKey, l.deleteSQL)
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        ColumnCodec.bind(key, to: s, at: 1)
        try s.run()
        guard s.changes > 0 else { throw notFound(classIndex, key) }
    }

    func notFound(_ classIndex: Int, _ key: FerryValue) -> FerryError {
        FerryError(.notFound, "no object of class '\(schema.classes[classIndex].name)' with primary key \(key.debugText)")
    }

    /// All rows of a class that match a compiled query, in insertion (rowid) order whichever
    /// index answered, before SORT/LIMIT. The order is restored in Swift rather than with
    /// ORDER BY, which would steer SQLite away from the index.
    func matchingRows(_ c: SQLiteConnection, _ query: CompiledQuery, classIndex: Int) throws -> [[FerryValue]] {
        let l = layouts[classIndex]
        let pushdown = SQLPushdown(query.predicate, schema: l.objectSchema)
        let s = try c.statement("SELECT rowid, \(l.selectColumns) FROM \(l.table)" + pushdown.whereClause)
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        for (i, v) in pushdown.bindings.enumerated() { ColumnCodec.bind(v, to: s, at: Int32(i + 1)) }
        var rows: [(Int64, [FerryValue])] = []
        var ordered = true
        var last = Int64.min
        while try s.step() {
            let row = try l.readRow(s, offset: 1)
            guard query.matches(row) else { continue }
            let rowid = s.int64(0)
            if rowid < last { ordered = false }
            last = rowid
            rows.append((rowid, row))
        }
        if !ordered { rows.sort { $0.0 < $1.0 } }
        return rows.map(\.1)
    }

    /// Every row of a table, read with the given layout (which may be of the stored schema).
    func allRows(_ c: SQLiteConnection, _ l: TableLayout) throws -> [[FerryValue]] {
        let s = try c.statement("SELECT \(l.selectColumns) FROM \(l.table) ORDER BY rowid")
        defer { s.resetKeepingBindings() } // ends the read: an open statement would pin the WAL
        var rows: [[FerryValue]] = []
        while try s.step() { rows.append(try l.readRow(s)) }
        return rows
    }

    func queryPlan(_ c: SQLiteConnection, _ query: CompiledQuery, classIndex: Int) throws -> String {
        let l = layouts[classIndex]
        let pushdown = SQLPushdown(query.predicate, schema: l.objectSchema)
        let s = try c.statement("EXPLAIN QUERY PLAN SELECT rowid, \(l.selectColumns) FROM \(l.table)" + pushdown.whereClause)
        defer { s.reset() }
        for (i, v) in pushdown.bindings.enumerated() { ColumnCodec.bind(v, to: s, at: Int32(i + 1)) }
        var lines: [String] = []
        while try s.step() { lines.append(s.string(3)) }
        return lines.joined(separator: "\n")
    }

    /// Applies one instruction to the tables (no history is written here). Used by writes
    /// through the API, by the history check's replay, and by sync to integrate downloads.
    /// Applies a synced instruction (the server's, or a local one laid again over the server's
    /// state); false when it does not fit this device's data or schema (a class or property it
    /// does not have, an object gone, a list index past the end, an add that overflows): the
    /// merge rules drop such an instruction. Any other failure (I/O, a full disk, a damaged
    /// file) is thrown, never swallowed (issue 22, point 10).
    func applyIfItFits(_ instruction: Instruction, on c: SQLiteConnection) throws -> Bool {
        do {
            try apply(instruction, on: c)
            return true
        } catch let e as FerryError where [.noSuchClass, .noSuchProperty, .wrongType, .notFound, .outOfRange, .duplicatePrimaryKey].contains(e.code) {
            return false
        }
    }

    func apply(_ instruction: Instruction, on c: SQLiteConnection) throws {
        let ci = try classIndex(named: instruction.table)
        let os = schema.classes[ci]
        func prop(_ name: String) throws -> Int {
            guard let i = os.propertyIndex(named: name) else { throw FerryError(.noSuchProperty, "class '\(os.name)' has no property '\(name)'") }
            return i
        }
        func row(_ key: FerryValue) throws -> [FerryValue] {
            guard let r = try readRow(c, ci, key: key) else { throw notFound(ci, key) }
            return r
        }
        func list(_ key: FerryValue, _ p: Int) throws -> [FerryValue] {
            guard os.properties[p].isList else { throw FerryError(.wrongType, "property '\(os.name).\(os.properties[p].name)' is not a list") }
            guard case .list(let items) = try row(key)[p] else { return [] }
            return items
        }
        switch instruction {
        case let .create(_, key, fields):
            var values = layouts[ci].defaults
            values[os.primaryKeyIndex] = key
            for f in fields { values[try prop(f.name)] = f.value }
            try insertRow(c, ci, values)
        case let .erase(_, key):
            try deleteRow(c, ci, key: key)
        case let .set(_, key, field, value):
            try updateColumn(c, ci, key: key, property: try prop(field), value: value)
        case let .addInteger(_, key, field, delta):
            let p = try prop(field)
            let current: Int64
            switch try row(key)[p] {
            case .int(let v): current = v
            case .null: current = 0
            default: throw FerryError(.wrongType, "property '\(os.name).\(field)' is not an int")
            }
            let (sum, overflow) = current.addingReportingOverflow(delta)
            guard !overflow else { throw FerryError(.outOfRange, "adding \(delta) to \(current) in '\(os.name).\(field)' overflows 64 bits") }
            try updateColumn(c, ci, key: key, property: p, value: .int(sum))
        case let .listInsert(_, key, field, index, value):
            let p = try prop(field)
            var items = try list(key, p)
            guard index >= 0 && index <= items.count else { throw outOfRange(os, field, index, items.count, insert: true) }
            items.insert(value, at: index)
            try updateColumn(c, ci, key: key, property: p, value: .list(items))
        case let .listSet(_, key, field, index, value):
            let p = try prop(field)
            var items = try list(key, p)
            guard index >= 0 && index < items.count else { throw outOfRange(os, field, index, items.count, insert: false) }
            items[index] = value
            try updateColumn(c, ci, key: key, property: p, value: .list(items))
        case let .listErase(_, key, field, index):
            let p = try prop(field)
            var items = try list(key, p)
            guard index >= 0 && index < items.count else { throw outOfRange(os, field, index, items.count, insert: false) }
            items.remove(at: index)
            try updateColumn(c, ci, key: key, property: p, value: .list(items))
        case let .listClear(_, key, field):
            let p = try prop(field)
            _ = try list(key, p)
            try updateColumn(c, ci, key: key, property: p, value: .list([]))
        }
    }

    private func outOfRange(_ os: ObjectSchema, _ field: String, _ index: Int, _ count: Int, insert: Bool) -> FerryError {
        FerryError(.outOfRange, "index \(index) is out of range for list '\(os.name).\(field)' of \(count) element\(count == 1 ? "" : "s")\(insert ? " (insert allows 0...\(count))" : "")")
    }
}
