// Fuzz target: the query language (lexer, parser, checker, evaluator), which parses text from
// hosts and, with sync, from other devices' subscriptions.
let fuzzSchema = try! ObjectSchema(name: "Item", properties: [
    Property(name: "_id", type: .objectId, isPrimaryKey: true),
    Property(name: "ownerId", type: .string),
    Property(name: "complexity", type: .int),
    Property(name: "score", type: .double, isOptional: true),
    Property(name: "tags", type: .string, isList: true),
])
let fuzzRow: [FerryValue] = [.objectId(try! ObjectId(hex: "65a1b2c3d4e5f60718293a4b")), .string("alice"), .int(4), .double(2.5),
                             .list([.string("a"), .string("bé")])]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzQuery(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let q = try? CompiledQuery(text, on: fuzzSchema, arguments: [.int(1), .string("x")]) {
        _ = q.matches(fuzzRow)
        _ = q.orderAndLimit([fuzzRow, fuzzRow], values: { $0 })
    }
    return 0
}
