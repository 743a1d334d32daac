import FerryCore

/// A client file's subscription set as one blob, the same bytes in every backend.
public enum SubscriptionCodec {
    public static func encode(_ subs: [Subscription]) -> [UInt8] {
        var w = ByteWriter()
        w.varint(UInt64(subs.count))
        for s in subs { w.string(s.name); w.string(s.objectType); w.string(s.query) }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws -> [Subscription] {
        var r = ByteReader(bytes)
        let n = try r.count(minSize: 3)
        var out: [Subscription] = []
        for _ in 0..<n { out.append(Subscription(name: try r.string(), objectType: try r.string(), query: try r.string())) }
        return out
    }
}
