/// The compensating writes (error 231) the server sent a client file, kept so that one whose
/// answer was lost with its connection is sent again (SPEC F-NOLOSS: every revert is reported).
///
/// Why the server must keep them: it answers an UPLOAD with a DOWNLOAD that acknowledges it
/// and then the ERROR 231 that names the refused objects. When the connection drops before
/// the device read them, the device's next BIND learns the acknowledgement (its catch-up
/// carries it) and never uploads the refused changeset again, so nothing would ever tell the
/// host why its write is gone, or even remove the write from the device (the deterministic
/// simulation found both: issue 25).
///
/// How: the upload's transaction appends a record (the acknowledgement the refusal followed,
/// its compensating writes) to the file's ledger, so a refusal is durable with the
/// acknowledgement. A device's BIND says through which local version it has every answer
/// (`answeredThrough`: it moves when a 231 is recorded, and to A when an acknowledgement moves
/// from A, since a 231 for A came before that); the server sends the records after it again
/// (`toRepeat`), with the objects' current states first. Pure: the stores keep the encoded
/// ledger (`encoded`, `decode`) beside the client file's acknowledgement.
public struct RefusalLedger: Sendable, Equatable {
    /// One answer's refusals: the compensating writes of the upload acknowledged through
    /// `through`.
    public struct Record: Sendable, Equatable {
        public var through: UInt64
        public var writes: [CompensatingWrite]
        public init(through: UInt64, writes: [CompensatingWrite]) {
            self.through = through
            self.writes = writes
        }
    }

    /// Oldest first; `through` never goes back.
    public private(set) var records: [Record] = []
    /// The newest `through` of a record dropped to keep the bound (0: none): a device that
    /// answered through less than it lost refusals it will not be told (logged by the server).
    public private(set) var droppedThrough: UInt64 = 0

    /// The most compensating writes a file's ledger keeps. A device that reads its answers
    /// leaves nothing to repeat; this bounds what one that never does can make the server keep.
    public static let maxWrites = 1_000

    public init() {}

    /// Records the refusals of an upload acknowledged through `through`, dropping the oldest
    /// records beyond `maxWrites` (and, of one upload's own, its first ones beyond it).
    public mutating func record(through: UInt64, writes: [CompensatingWrite], maxWrites: Int = RefusalLedger.maxWrites) {
        guard !writes.isEmpty else { return }
        let bound = max(1, maxWrites)
        if let last = records.last, last.through == through {
            records[records.count - 1].writes += writes
        } else {
            records.append(Record(through: through, writes: writes))
        }
        var total = records.reduce(0) { $0 + $1.writes.count }
        while total > bound, records.count > 1 {
            total -= records[0].writes.count
            droppedThrough = max(droppedThrough, records[0].through)
            records.removeFirst()
        }
        if total > bound {
            records[0].writes.removeFirst(total - bound)
            droppedThrough = max(droppedThrough, records[0].through)
        }
    }

    /// What a device that has every answer through `answeredThrough` must be told again: the
    /// refusals of the acknowledgements after it, in the order they were made (one write per
    /// object, the last reason given for it), none past `acknowledged` (the server has made
    /// nothing later durable).
    public func toRepeat(answeredThrough: UInt64, acknowledged: UInt64) -> [CompensatingWrite] {
        var out: [CompensatingWrite] = []
        var index: [ObjectKey: Int] = [:]
        for r in records where r.through > answeredThrough && r.through <= acknowledged {
            for w in r.writes {
                let k = ObjectKey(table: w.objectType, key: w.primaryKey)
                if let i = index[k] { out[i] = w } else {
                    index[k] = out.count
                    out.append(w)
                }
            }
        }
        return out
    }

    /// Drops what a device that has every answer through `answeredThrough` is never sent again
    /// (`toRepeat` skips it): the records through it, and the mark of older ones the bound
    /// dropped. Its BIND says so, and the server forgets them then, so a device that reads its
    /// answers leaves nothing behind and its uploads read an empty ledger.
    public mutating func forgetAnswered(through answeredThrough: UInt64) {
        records.removeAll { $0.through <= answeredThrough }
        if droppedThrough <= answeredThrough { droppedThrough = 0 }
    }

    /// What a store keeps of the ledger it holds as `stored` once a device has every answer
    /// through `answeredThrough`: nil when that changes nothing; a damaged ledger is dropped
    /// (an empty one), since the bind that read it logged it and can send none of it again.
    /// Both stores' `forgetAnsweredRefusals` apply it, then write the result (empty: none).
    public static func forgettingAnswered(stored: [UInt8], through answeredThrough: UInt64) -> RefusalLedger? {
        guard !stored.isEmpty else { return nil }
        // nil: damaged, and what replaces it is the empty ledger (see above).
        let before = try? decode(stored)
        var after = before ?? RefusalLedger()
        after.forgetAnswered(through: answeredThrough)
        return after == before ? nil : after
    }

    /// What a device's BIND with `answeredThrough` does: the refusals to send it again
    /// (`toRepeat`), and the ledger to keep (`forgetAnswered`; store it when it differs from
    /// this one). The server's bind and the simulation's both apply it.
    public func atBind(answeredThrough: UInt64, acknowledged: UInt64) -> (repeat: [CompensatingWrite], kept: RefusalLedger) {
        var kept = self
        kept.forgetAnswered(through: answeredThrough)
        return (toRepeat(answeredThrough: answeredThrough, acknowledged: acknowledged), kept)
    }

    /// Whether a device that answered through `answeredThrough` missed refusals the bound
    /// dropped.
    public func lostRefusals(answeredThrough: UInt64) -> Bool { droppedThrough > answeredThrough }

    public var isEmpty: Bool { records.isEmpty && droppedThrough == 0 }

    /// The stored form: a format byte (1), `droppedThrough`, the record count, and per record
    /// `through` and its writes (`CompensatingWriteCodec`).
    public var encoded: [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.byte(1)
        w.varint(droppedThrough)
        w.varint(UInt64(records.count))
        for r in records {
            w.varint(r.through)
            CompensatingWriteCodec.encode(r.writes, into: &w)
        }
        return w.bytes
    }

    /// Reads a stored ledger as hostile input (a damaged store): a malformed one throws
    /// `corrupt`, never traps; an empty blob is an empty ledger.
    public static func decode(_ bytes: [UInt8]) throws -> RefusalLedger {
        var ledger = RefusalLedger()
        guard !bytes.isEmpty else { return ledger }
        var r = ByteReader(bytes)
        let format = try r.byte()
        guard format == 1 else { throw r.corrupt("unknown refusal ledger format \(format)") }
        ledger.droppedThrough = try r.varint()
        var previous: UInt64 = 0
        for _ in 0..<(try r.count(minSize: 2)) {
            let through = try r.varint()
            guard through >= previous else { throw r.corrupt("refusal records out of order") }
            previous = through
            ledger.records.append(Record(through: through, writes: try CompensatingWriteCodec.decode(from: &r)))
        }
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after a refusal ledger") }
        return ledger
    }
}

/// Compensating writes as bytes: a count, then per write the class, the primary key
/// (`ValueCodec`) and the reason. The protocol's ERROR message, the server's refusal ledger and
/// a device's rejected receipts all store them so.
public enum CompensatingWriteCodec {
    public static func encode(_ writes: [CompensatingWrite], into w: inout ByteWriter) {
        w.varint(UInt64(writes.count))
        for c in writes {
            w.string(c.objectType)
            ValueCodec.encode(c.primaryKey, into: &w)
            w.string(c.reason)
        }
    }

    /// Hostile input: bounded by the bytes left, never a trap.
    public static func decode(from r: inout ByteReader) throws -> [CompensatingWrite] {
        var out: [CompensatingWrite] = []
        for _ in 0..<(try r.count(minSize: 3)) {
            let type = try r.string()
            let key = try ValueCodec.decode(from: &r, allowList: false)
            out.append(CompensatingWrite(objectType: type, primaryKey: key, reason: try r.string()))
        }
        return out
    }
}
