// Fuzz target: ChangesetCodec.decode, the decoder of history entries (and of sync uploads).
// Any input must decode or throw; a decoded changeset must re-encode to bytes that decode
// and re-encode to the same bytes.
public func fuzzChangeset(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let cs = try? ChangesetCodec.decode(bytes) {
        // Compare encodings: NaN payloads make equal changesets compare unequal.
        let encoded = ChangesetCodec.encode(cs)
        let again = try? ChangesetCodec.decode(encoded)
        precondition(again.map(ChangesetCodec.encode) == encoded, "changeset does not round-trip")
    }
    return 0
}
