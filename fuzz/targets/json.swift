// Fuzz target: JSON.parse, which reads every auth answer (login, refresh) the client gets
// over HTTP. Checks that no input traps, and that a parsed document's strings re-encode and
// parse back to the same strings.
public func fuzzJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let parsed = try? JSON.parse(bytes) else { return 0 }
    if case .object(let members) = parsed {
        let strings = members.compactMap { m -> (String, String)? in
            if case .string(let v) = m.1 { return (m.0, v) } else { return nil }
        }
        let again = try? JSON.parse(Array(JSON.encodeObject(strings).utf8))
        precondition(again == .object(strings.map { ($0.0, .string($0.1)) }), "a string object did not round-trip")
    }
    return 0
}
