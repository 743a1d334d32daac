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

    /// Records a create: the key, then exactly `fieldCount` calls to `field`.
    mutating func beginCreate(_ layout: TableLayout, key: BorrowedValue, fieldCount: Int) {
        let table = intern(layout)
        writer.beginCreate(table: table, key: key, fieldCount: fieldCount)
    }

    mutating func field(_ layout: TableLayout, _ property: Int, _ value: BorrowedValue) {
        writer.field(fieldNames[layout.classIndex][property], value)
    }

    /// The binary changeset.
    func encode(timestamp: Int64) -> [UInt8] { writer.finish(timestamp: timestamp) }
}
