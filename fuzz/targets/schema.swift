// Fuzz target: SchemaCodec.decode, the decoder of the schema stored in a database file.
public func fuzzSchema(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let s = try? SchemaCodec.decode(bytes) {
        precondition((try? SchemaCodec.decode(SchemaCodec.encode(s))) == s, "schema does not round-trip")
    }
    return 0
}
