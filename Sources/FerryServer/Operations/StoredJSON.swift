#if canImport(FerryCore)
import FerryCore // the fuzz build compiles this file into one module with FerryCore's sources
#endif

/// A JSON value for what the server stores as JSON text and hands back inside its own JSON
/// (a sync log entry's details), and for the JSON log lines. Object keys keep their order.
enum StoredJSON: Sendable, Equatable, Codable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case null
    case array([StoredJSON])
    case object([(String, StoredJSON)])

    static func == (a: StoredJSON, b: StoredJSON) -> Bool { a.text == b.text }

    /// The compact JSON text.
    var text: String {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the compact JSON text as UTF-8: one buffer for the whole value, not a string
    /// per member (the sync log writes one per upload, on the upload's path; issue 23).
    func write(into out: inout [UInt8]) {
        switch self {
        case .string(let s): JSONText.appendQuoted(s, to: &out)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d): out.append(contentsOf: (d.isFinite ? String(d) : "null").utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (n, v) in items.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (n, (k, v)) in members.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                JSONText.appendQuoted(k, to: &out)
                out.append(UInt8(ascii: ":"))
                v.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        // Each `try?` below asks what kind of JSON value this is; a no moves on to the next kind.
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            self = .object(try keyed.allKeys.sorted { $0.stringValue < $1.stringValue }.map { ($0.stringValue, try keyed.decode(StoredJSON.self, forKey: $0)) })
            return
        }
        if var list = try? decoder.unkeyedContainer() {
            var items: [StoredJSON] = []
            while !list.isAtEnd { items.append(try list.decode(StoredJSON.self)) }
            self = .array(items)
            return
        }
        // One value: the `try?` below ask which kind, as above.
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { self = .null }
        else if let b = try? single.decode(Bool.self) { self = .bool(b) }
        else if let i = try? single.decode(Int64.self) { self = .int(i) }
        else if let d = try? single.decode(Double.self) { self = .double(d) }
        else { self = .string(try single.decode(String.self)) }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .string(let s): var c = encoder.singleValueContainer(); try c.encode(s)
        case .int(let i): var c = encoder.singleValueContainer(); try c.encode(i)
        case .double(let d): var c = encoder.singleValueContainer(); try c.encode(d)
        case .bool(let b): var c = encoder.singleValueContainer(); try c.encode(b)
        case .null: var c = encoder.singleValueContainer(); try c.encodeNil()
        case .array(let items):
            var c = encoder.unkeyedContainer()
            for v in items { try c.encode(v) }
        case .object(let members):
            var c = encoder.container(keyedBy: Key.self)
            for (k, v) in members { try c.encode(v, forKey: Key(stringValue: k)) }
        }
    }
}
