// Fuzz target: the query language (lexer, parser, checker, evaluator), which parses text from
// hosts and, with sync, from other devices' subscriptions. The corpus holds long AND/OR chains
// and deep nesting (issue 11 point 4); libFuzzer takes its -max_len from the largest seed.
let fuzzSchema = try! ObjectSchema(name: "Item", properties: [
    Property(name: "_id", type: .objectId, isPrimaryKey: true),
    Property(name: "ownerId", type: .string),
    Property(name: "complexity", type: .int),
    Property(name: "score", type: .double, isOptional: true),
    Property(name: "tags", type: .string, isList: true),
])
let fuzzRow: [FerryValue] = [.objectId(try! ObjectId(hex: "65a1b2c3d4e5f60718293a4b")), .string("alice"), .int(4), .double(2.5),
                             .list([.string("a"), .string("bé")])]

public func fuzzQuery(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    if let q = try? CompiledQuery(text, on: fuzzSchema, arguments: [.int(1), .string("x")]) {
        precondition(size <= QueryLimits.maxBytes && q.termCount <= QueryLimits.maxTerms, "a query beyond the limits compiled")
        _ = q.matches(fuzzRow)
        _ = q.orderAndLimit([fuzzRow, fuzzRow], values: { $0 })
    }
    // The same text with the length and term limits lifted (the module includes FerryCore, so
    // the internal entry point is reachable): only nesting may make anything recurse, so long
    // chains in the corpus must parse, check, evaluate and be freed without exhausting the stack.
    if let parsed = try? QueryParser.parse(text, maxBytes: .max, maxTerms: .max) {
        var compiler = QueryCompiler(schema: fuzzSchema, arguments: [.int(1), .string("x")])
        if let predicate = try? compiler.compile(parsed.predicate) {
            _ = QueryEvaluator.evaluate(predicate, fuzzRow)
            _ = predicate.conjuncts
        }
    }
    return 0
}
