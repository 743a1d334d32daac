// Fuzz target: DataAPIValues, which reads every value a Data API call sends the server
// (Extended JSON: query arguments, primary keys, documents). Checks that no input traps, that a
// value read from JSON writes out as JSON that reads back to the same value (doubles aside:
// a whole double reads back as an int, which the API takes for a double property), and that a
// date the ISO parser accepts writes back to the same instant.
// fuzz-sources: Sources/FerryServer/DataAPI/DataAPIValues.swift
import Foundation

public func fuzzExtendedJSON(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(UnsafeBufferPointer(start: data, count: size))
    if let text = String(data: bytes, encoding: .utf8), let t = try? DataAPIValues.date(text) {
        var out: [UInt8] = []
        DataAPIValues.append(.timestamp(t), to: &out)
        let iso = String(decoding: out.dropFirst(#"{"$date":""#.utf8.count).dropLast(2), as: UTF8.self)
        precondition((try? DataAPIValues.date(iso)) == t, "a date did not round-trip: \(text) -> \(iso)")
    }
    guard let json = try? JSONDecoder().decode(JSON.self, from: bytes), let value = try? DataAPIValues.value(json) else { return 0 }
    guard !containsDouble(value) else { return 0 }
    var out: [UInt8] = []
    DataAPIValues.append(value, to: &out)
    let again = try? DataAPIValues.value(try JSONDecoder().decode(JSON.self, from: Data(out)))
    precondition(again == value, "a value did not round-trip: \(String(decoding: out, as: UTF8.self))")
    return 0
}

private func containsDouble(_ v: FerryValue) -> Bool {
    switch v {
    case .double: return true
    case .list(let items): return items.contains(where: containsDouble)
    default: return false
    }
}
