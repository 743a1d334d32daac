import FerryCore

/// The changes of the open write transaction, already in the binary form the commit writes to
/// the history as one changeset. Creates through the bulk path are encoded straight from the
/// caller's buffers, so a large insert builds no per-row Swift objects.
struct TransactionLog {
    private var writer = ChangesetWriter(capacity: 4096)
    /// Interned name indices per class: the table name and each property's name.
    private var tableNames: [Int]
    private var fieldNames: [[Int]]

    init(classCount: Int) {
        tableNames = [Int](repeating: -1, count: classCount)
        fieldNames = [[Int]](repeating: [], count: classCount)
    }

    var isEmpty: Bool { writer.isEmpty }

    mutating func append(_ i: Instruction) { writer.append(i) }

    private mutating func intern(_ layout: TableLayout) -> Int {
        let c = layout.classIndex
        if tableNames[c] < 0 {
            tableNames[c] = writer.intern(layout.objectSchema.name)
            fieldNames[c] = layout.objectSchema.properties.map { writer.intern($0.name) }
        }
        return tableNames[c]
    }

    /// The fields of the last create per class, so a run of similar creates reuses them:
    /// the mask of properties given, and their property indices and interned names in
    /// property order.
    private var lastFields: [(mask: UInt64, properties: [Int], names: [Int])?] = []

    /// Records a create from borrowed values; `given` has a bit per property in `values`.
    mutating func appendCreate(_ layout: TableLayout, given: UInt64, _ values: UnsafeBufferPointer<(Int, BorrowedValue)>) {
        let table = intern(layout)
        let c = layout.classIndex
        if lastFields.count <= c { lastFields += Array(repeating: nil, count: c + 1 - lastFields.count) }
        let pk = layout.primaryKeyIndex
        let mask = given & ~(UInt64(1) << UInt64(pk))
        if lastFields[c]?.mask != mask {
            var properties: [Int] = []
            var m = mask
            while m != 0 {
                properties.append(m.trailingZeroBitCount)
                m &= m - 1
            }
            lastFields[c] = (mask, properties, properties.map { fieldNames[c][$0] })
        }
        guard let fields = lastFields[c] else { return }
        fields.names.withUnsafeBufferPointer { writer.beginCreate(table: table, fields: $0) }
        for (index, value) in values where index == pk { writer.createKey(value) }
        for (i, property) in fields.properties.enumerated() {
            for (index, value) in values where index == property { writer.createField(i, value) }
        }
    }

    /// The binary changeset.
    func encode(timestamp: Int64) -> [UInt8] { writer.finish(timestamp: timestamp) }
}
