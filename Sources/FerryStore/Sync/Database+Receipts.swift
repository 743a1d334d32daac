import FerryCore
import FerrySQLite

/// Write receipts: a commit's receipt is the history version of its changeset (free on the
/// insert path), and its state is read from what the file already keeps (the acknowledged
/// version) plus the sync agent's watermarks and a small table of rejected receipts.
///
/// Which receipts a compensating write rejects: the server answers each UPLOAD message with a
/// DOWNLOAD that acknowledges its last client version, then, if it reverted writes, an ERROR
/// 231 naming the objects. So a 231 concerns the changesets of the acknowledgement just before
/// it; of those, the transactions that wrote one of the named objects are rejected, each with
/// the compensating writes of the objects it wrote. The others of that upload are acknowledged.
extension Database {
    /// How many rejected receipts a file keeps at most. Past it, the oldest ones the host has
    /// read are dropped first, then the oldest; a receipt at or before the newest dropped one
    /// then reads as expired (`notFound`). Acknowledged receipts take no room at all.
    package static let maxRejectedReceipts = 1024

    static let rejectionsTable = "__ferry_receipt_rejections"

    /// The state of a receipt `commit()` returned. Any thread.
    /// Throws `notFound` for a receipt this file never gave (or one that expired, above).
    public func receiptStatus(_ receipt: UInt64) throws -> ReceiptStatus {
        if receipt == 0 { return ReceiptStatus(receipt: 0, state: .acknowledged) }
        let marks = storeForSync.receipts.snapshot()
        // A transaction a client reset recovered follows the changeset that uploads it again
        // (always a later one: the recursion ends).
        var aliased: UInt64?
        var status = try readingStore { c -> ReceiptStatus in
            let latest = try Self.latestVersion(c)
            guard receipt <= latest else {
                throw FerryError(.notFound, "no write receipt \(receipt) in this database (its last commit has receipt \(latest))")
            }
            if try Self.hasTable(c, Self.aliasesTable) {
                let a = try c.statement("SELECT target FROM \(Self.aliasesTable) WHERE version = ?")
                defer { a.resetKeepingBindings() }
                a.bind(1, Int64(bitPattern: receipt))
                if try a.step() {
                    aliased = UInt64(bitPattern: a.int64(0))
                    return ReceiptStatus(receipt: receipt, state: .local)
                }
            }
            if try Self.hasTable(c, Self.rejectionsTable) {
                let s = try c.statement("SELECT info FROM \(Self.rejectionsTable) WHERE version = ?")
                defer { s.resetKeepingBindings() }
                s.bind(1, Int64(bitPattern: receipt))
                if try s.step() {
                    return ReceiptStatus(receipt: receipt, state: .rejected, compensatingWrites: try RejectionCodec.decode(s.blob(0)))
                }
            }
            let forgotten = try Self.getMeta(c, "receipts.forgotten")
            if receipt <= forgotten {
                throw FerryError(.notFound, "write receipt \(receipt) expired: the file keeps the last \(Self.maxRejectedReceipts) rejected receipts, and older ones were dropped")
            }
            let ack = try Self.getMeta(c, "sync.acknowledged")
            return ReceiptStatus(receipt: receipt, state: ReceiptRules.state(of: receipt, acknowledged: ack, settled: marks.settled, uploaded: marks.uploaded))
        }
        if let target = aliased {
            guard target > receipt else { throw FerryError(.corrupt, "write receipt \(receipt) follows receipt \(target), which is not later") }
            status = try receiptStatus(target)
            status.receipt = receipt
        }
        if status.state == .rejected { storeForSync.receipts.noteRead(receipt) }
        // After the state is read: the MARK the first question sends settles it a moment later.
        storeForSync.receipts.noteInterest()
        return status
    }

    /// Sync engine: history versions through `v` were sent to the server.
    package func noteReceiptsUploaded(through v: UInt64) { storeForSync.receipts.noteUploaded(through: v) }

    /// Sync engine: the server's answers through `v` are complete (acknowledged, and any
    /// compensating write for them recorded).
    package func noteReceiptsSettled(through v: UInt64) { storeForSync.receipts.noteSettled(through: v) }

    /// Sync engine: whether a host has asked about a receipt of this store (read a state or
    /// waited on one): only then are the server's answers settled with MARKs.
    package var receiptsWanted: Bool { storeForSync.receipts.isInterested }

    /// Sync engine: `listener` runs, on the asking thread, when a host first asks about a
    /// receipt of this store; nil removes `owner`'s.
    package func setReceiptInterestListener(_ owner: AnyObject, _ listener: (@Sendable () -> Void)?) {
        storeForSync.receipts.setInterestListener(ObjectIdentifier(owner), listener)
    }

    /// Sync engine: the last history version whose answer is complete (nil: none this run).
    package var receiptsSettled: UInt64? { storeForSync.receipts.snapshot().settled }

    /// Sync engine: a session starts; what the file says is acknowledged is settled.
    package func startReceiptSession(acknowledged: UInt64) { storeForSync.receipts.resetSettled(to: acknowledged) }

    /// Records a compensating write (error 231) against the receipts of the changesets in
    /// `after+1...through` (the acknowledgement it follows) that wrote a named object; each
    /// gets the writes of the objects it wrote. Returns the rejected receipts.
    @discardableResult
    package func recordRejection(_ writes: [CompensatingWrite], after: UInt64, through: UInt64,
                                bound: Int = Database.maxRejectedReceipts) throws -> [UInt64] {
        guard through > after, !writes.isEmpty else { return [] }
        let read = storeForSync.receipts.takeRead()
        var rejected: [UInt64] = []
        try writingStore { c in
            try Self.createTables(c)
            if !read.isEmpty {
                let mark = try c.statement("UPDATE \(Self.rejectionsTable) SET read = 1 WHERE version = ?")
                for v in read {
                    mark.bind(1, Int64(bitPattern: v))
                    try mark.run()
                    mark.resetKeepingBindings()
                }
            }
            var found: [(UInt64, [CompensatingWrite])] = []
            let s = try c.statement("SELECT version, changeset FROM __ferry_history WHERE version > ? AND version <= ? ORDER BY version")
            s.bind(1, Int64(bitPattern: after)); s.bind(2, Int64(bitPattern: through))
            while try s.step() {
                // Ferry wrote these rows: one that does not decode is a damaged file, said as such.
                let cs = try ChangesetCodec.decode(s.blob(1))
                let touched = Set(cs.instructions.map { ObjectKey(table: $0.table, key: $0.key) })
                let concerning = writes.filter { touched.contains(ObjectKey(table: $0.objectType, key: $0.primaryKey)) }
                if !concerning.isEmpty { found.append((UInt64(bitPattern: s.int64(0)), concerning)) }
            }
            s.resetKeepingBindings()
            let insert = try c.statement("INSERT OR REPLACE INTO \(Self.rejectionsTable) (version, info, read) VALUES (?, ?, 0)")
            for (v, w) in found {
                insert.bind(1, Int64(bitPattern: v)); insert.bind(2, blob: RejectionCodec.encode(w))
                try insert.run()
                insert.resetKeepingBindings()
                rejected.append(v)
            }
            try Self.trimRejections(c, bound: max(1, bound))
            // This 231 is the answer's last part: a server that keeps refusals need not send it again.
            if try Self.getMeta(c, "sync.answered") < through { try Self.putMeta(c, "sync.answered", min(through, try Self.getMeta(c, "sync.acknowledged"))) }
            return nil
        }
        return rejected
    }

    /// Keeps at most `bound` rejected receipts: the oldest read ones go first, then the
    /// oldest; the newest dropped version is remembered so older receipts read as expired.
    private static func trimRejections(_ c: SQLiteConnection, bound: Int) throws {
        for onlyRead in [true, false] {
            let count = try c.statement("SELECT COUNT(*) FROM \(rejectionsTable)")
            _ = try count.step()
            let excess = Int(count.int64(0)) - bound
            count.resetKeepingBindings()
            guard excess > 0 else { return }
            let pick = try c.statement("SELECT COALESCE(MAX(version), 0) FROM (SELECT version FROM \(rejectionsTable)\(onlyRead ? " WHERE read = 1" : "") ORDER BY version LIMIT ?)")
            pick.bind(1, Int64(excess))
            _ = try pick.step()
            let newestDropped = UInt64(bitPattern: pick.int64(0))
            pick.resetKeepingBindings()
            let drop = try c.statement("DELETE FROM \(rejectionsTable) WHERE version IN (SELECT version FROM \(rejectionsTable)\(onlyRead ? " WHERE read = 1" : "") ORDER BY version LIMIT ?)")
            drop.bind(1, Int64(excess))
            try drop.run()
            drop.resetKeepingBindings()
            if newestDropped > 0 { try putMeta(c, "receipts.forgotten", max(newestDropped, try getMeta(c, "receipts.forgotten"))) }
        }
    }

    private static func hasTable(_ c: SQLiteConnection, _ name: String) throws -> Bool {
        let s = try c.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?")
        defer { s.resetKeepingBindings() }
        s.bind(1, name)
        return try s.step()
    }

    static let aliasesTable = "__ferry_receipt_aliases"

    private static func createTables(_ c: SQLiteConnection) throws {
        try c.exec("""
            CREATE TABLE IF NOT EXISTS \(rejectionsTable) (version INTEGER PRIMARY KEY, info BLOB NOT NULL, read INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS \(aliasesTable) (version INTEGER PRIMARY KEY, target INTEGER NOT NULL);
            """)
    }

    /// Inside a client reset's transaction: the unsynced transactions were never acknowledged
    /// as such. One that wrote an object whose changes the reset discarded is rejected, with
    /// those objects' report entries as its compensating writes; the others were recovered
    /// into the changeset `recoveredVersion` and from now on read that changeset's state.
    static func settleReceiptsOfReset(_ c: SQLiteConnection, _ changesets: [(version: UInt64, objects: Set<ObjectKey>)],
                                      entries: [ClientResetReport.Entry], recoveredVersion: UInt64) throws {
        guard !changesets.isEmpty else { return }
        try createTables(c)
        let reject = try c.statement("INSERT OR REPLACE INTO \(rejectionsTable) (version, info, read) VALUES (?, ?, 0)")
        let alias = try c.statement("INSERT OR REPLACE INTO \(aliasesTable) (version, target) VALUES (?, ?)")
        for (version, fate) in ResetRecovery.receiptFates(changesets, entries: entries, recoveredVersion: recoveredVersion) {
            switch fate {
            case .rejected(let writes):
                reject.bind(1, Int64(bitPattern: version)); reject.bind(2, blob: RejectionCodec.encode(writes))
                try reject.run()
                reject.resetKeepingBindings()
            case .follows(let target):
                alias.bind(1, Int64(bitPattern: version)); alias.bind(2, Int64(bitPattern: target))
                try alias.run()
                alias.resetKeepingBindings()
            case .unchanged:
                break
            }
        }
        try trimRejections(c, bound: maxRejectedReceipts)
    }
}
