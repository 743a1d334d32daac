import FerryCore

/// The stored form of a rejected receipt's compensating writes: a count, then per write the
/// class, the primary key (`ValueCodec`) and the reason. Read back as hostile input (the file
/// may be damaged): a malformed blob is an error, never a trap.
enum RejectionCodec {
    static func encode(_ writes: [CompensatingWrite]) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.varint(UInt64(writes.count))
        for c in writes {
            w.string(c.objectType)
            ValueCodec.encode(c.primaryKey, into: &w)
            w.string(c.reason)
        }
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [CompensatingWrite] {
        var r = ByteReader(bytes)
        var out: [CompensatingWrite] = []
        for _ in 0..<(try r.count(minSize: 3)) {
            let type = try r.string()
            let key = try ValueCodec.decode(from: &r, allowList: false)
            out.append(CompensatingWrite(objectType: type, primaryKey: key, reason: try r.string()))
        }
        guard r.isAtEnd else { throw FerryError(.corrupt, "trailing bytes after a rejected receipt's compensating writes") }
        return out
    }
}
