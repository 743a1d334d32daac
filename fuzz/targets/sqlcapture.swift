// Fuzz target: SQLWriteDecoding, the server's reader of a backend's SQL writes captured by the
// SQL tables' triggers (sql_inbox rows: whatever a backend put in the tables, so hostile).
// Checks that no input traps, and that every object a decoded transaction touches is among
// the keys a refusal would put back.
// fuzz-sources: Sources/FerryPostgresStorage/SQLWriteDecoding.swift Sources/FerrySyncStorage/ObjectKey+StorageOrder.swift
private let captureSchema: Schema = {
    let every = [
        Property(name: "_id", type: .objectId, isPrimaryKey: true),
        Property(name: "flag", type: .bool), Property(name: "i", type: .int), Property(name: "d", type: .double),
        Property(name: "s", type: .string), Property(name: "b", type: .binary), Property(name: "t", type: .timestamp),
        Property(name: "u", type: .uuid, isOptional: true), Property(name: "ints", type: .int, isList: true),
        Property(name: "ids", type: .objectId, isList: true),
    ]
    return try! Schema([ObjectSchema(name: "Every", properties: every)])
}()

public func fuzzSQLCapture(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let first = bytes.first else { return 0 }
    // The first byte picks the operation; the rest is old and new, split at the first 0.
    let rest = bytes.dropFirst()
    let split = rest.firstIndex(of: 0) ?? rest.endIndex
    let old = String(decoding: rest[rest.startIndex..<split], as: UTF8.self)
    let new = split < rest.endIndex ? String(decoding: rest[(split + 1)...], as: UTF8.self) : old
    let operation = ["INSERT", "UPDATE", "DELETE", "MERGE"][Int(first % 4)]
    let rows = [CapturedRow(id: 1, table: first & 4 == 0 ? "Every" : "Gone", operation: operation, old: old, new: new)]
    let keys = Set(SQLWriteDecoding.keys(rows, schema: captureSchema))
    if let decoded = try? SQLWriteDecoding.decode(rows, schema: captureSchema) {
        precondition(Set(decoded.keys).isSubset(of: keys), "a touched object is not among the keys a refusal puts back")
    }
    return 0
}
