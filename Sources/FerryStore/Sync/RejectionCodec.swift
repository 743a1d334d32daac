import FerryCore

/// The stored form of a rejected receipt's compensating writes (`CompensatingWriteCodec`).
/// Read back as hostile input (the file may be damaged): a malformed blob is an error, never a
/// trap.
enum RejectionCodec {
    static func encode(_ writes: [CompensatingWrite]) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        CompensatingWriteCodec.encode(writes, into: &w)
        return w.bytes
    }

    static func decode(_ bytes: [UInt8]) throws -> [CompensatingWrite] {
        var r = ByteReader(bytes)
        let out = try CompensatingWriteCodec.decode(from: &r)
        guard r.isAtEnd else { throw FerryError(.corrupt, "trailing bytes after a rejected receipt's compensating writes") }
        return out
    }
}
