// Fuzz target: ExtendedJSON, the client's reader of the Data API's answers to ferry_remote_find
// and ferry_remote_count (off the network, so hostile). Checks that no input traps; that a
// value read from JSON writes out as a query argument that reads back to the same value
// (NaN aside: it equals nothing); and that a date the reader accepts writes back to the same
// instant.
// fuzz-sources: Sources/FerryClient/Sync/ExtendedJSON.swift
public func fuzzRemoteJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? ExtendedJSON.findPage(bytes)
    _ = try? ExtendedJSON.countPage(bytes)
    if let text = String(validating: bytes, as: UTF8.self), let t = try? ExtendedJSON.date(text) {
        let again = try? ExtendedJSON.date(ExtendedJSON.dateText(t))
        precondition(again == t, "a date did not round-trip: \(text) -> \(ExtendedJSON.dateText(t))")
    }
    guard let raw = try? ExtendedJSON.parse(bytes), let value = try? ExtendedJSON.value(raw), !containsNaN(value) else { return 0 }
    var out: [UInt8] = []
    ExtendedJSON.appendArgument(value, to: &out)
    let again = try? ExtendedJSON.value(ExtendedJSON.parse(out))
    precondition(again == value, "a value did not round-trip: \(String(decoding: out, as: UTF8.self))")
    return 0
}

private func containsNaN(_ v: FerryValue) -> Bool {
    switch v {
    case .double(let d): return d.isNaN
    case .list(let items): return items.contains(where: containsNaN)
    default: return false
    }
}
