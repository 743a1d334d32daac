// Fuzz target: ValueCodec.decode, the decoder of list columns and of values in changesets.
public func fuzzValue(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let v = try? ValueCodec.decode(bytes) {
        // Doubles with NaN payloads compare unequal; compare encodings instead.
        precondition(ValueCodec.encode(v) == ValueCodec.encode((try? ValueCodec.decode(ValueCodec.encode(v))) ?? .null),
                     "value does not round-trip")
    }
    return 0
}
