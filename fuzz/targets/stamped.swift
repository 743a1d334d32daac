// Fuzz target: the server's stored merge state (StampedObject and ListOperationLog decoders),
// read back from its SQLite store. The store is the server's own, but a damaged file must give
// an error, never a crash. Checks round trips of what decodes.
public func fuzzStamped(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let os = try! ObjectSchema(name: "Item", properties: [
        Property(name: "_id", type: .objectId, isPrimaryKey: true),
        Property(name: "ownerId", type: .string),
        Property(name: "complexity", type: .int),
        Property(name: "tags", type: .string, isList: true),
    ])
    if let o = try? StampedObject.decode(bytes, schema: os) {
        let again = try? StampedObject.decode(o.encode(), schema: os)
        precondition(again.map { ValueCodec.encode(.list($0.values)) == ValueCodec.encode(.list(o.values)) && $0.stamps == o.stamps && $0.versions == o.versions } == true,
                     "a stamped object did not round-trip")
    }
    var r = ByteReader(bytes)
    if let log = try? ListOperationLog.decode(from: &r) {
        var w = ByteWriter()
        log.encode(into: &w)
        var r2 = ByteReader(w.bytes)
        precondition((try? ListOperationLog.decode(from: &r2)) == log, "a list operation log did not round-trip")
        // Transforming against any log never traps.
        _ = log.transform(.insert(Int(size)), property: 3, base: 0, origin: 1)
        _ = log.transform(.erase(0), property: 3, base: 0, origin: 1)
    }
    return 0
}
