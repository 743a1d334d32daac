// Fuzz target: ProtocolCodec.decode, the decoder of every sync frame a peer sends (WRITE_RULES,
// the server's write rules with their nested document filters, included: corpus/protocol),
// and RefusalLedger.decode, the server's stored refusals (the same compensating-write coding).
public func fuzzProtocol(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let m = try? ProtocolCodec.decode(bytes) {
        let encoded = ProtocolCodec.encode(m)
        precondition((try? ProtocolCodec.decode(encoded)).map(ProtocolCodec.encode) == encoded, "message does not round-trip")
    }
    if let ledger = try? RefusalLedger.decode(bytes) {
        // Compared as bytes, as the messages are: a NaN key is not equal to itself as a value.
        let encoded = ledger.encoded
        precondition((try? RefusalLedger.decode(encoded))?.encoded == encoded, "refusal ledger does not round-trip")
    }
    return 0
}
