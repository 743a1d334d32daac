import FerryCore
import FerryPostgresStorage
import FerrySyncStorage
import Logging

/// Integrates a backend's SQL writes to the SQL tables (PostgreSQL; docs/backend.md, "Writing
/// with SQL"). Woken by the capture triggers' NOTIFY, it takes the inbox's transactions in the
/// order their rows were written and commits each as one server-origin changeset
/// (`BackendWrites.writeCaptured`): merged with what devices wrote by the same rules as an
/// upload (the changeset is stamped with the time the backend wrote), fanned out to the
/// devices whose view it touches, and the tables' rows of every object it touched are
/// rewritten with the merged state in the same transaction that takes it out of the inbox.
///
/// Every node runs one; a transaction is integrated by whichever commits it first (the
/// other's commit finds the inbox empty and writes nothing).
///
/// A transaction Ferry cannot take (a value it cannot hold, a required value missing, more
/// than `maxRows` rows) is refused whole: nothing of it reaches a device, its rows in the
/// tables are put back as the store has them, and it is recorded (the sync log's `sql_write`
/// entries, the metric `ferry_sql_writes_total{result="refused"}`, the server's log).
actor SQLWriteIntegrator {
    /// Rows of one backend transaction integrated at most; a larger one is refused (split it).
    static let maxRows = 100_000
    /// Captured transactions read per query, and rows per page.
    static let batch = 16, page = 5_000

    private let storage: PostgresSyncStorage
    private let writes: BackendWrites
    private let schema: Schema
    private let log: SyncLogRecorder?
    private let metrics: ServerMetrics
    private let logger: Logger
    private var retryDelay: Duration = .zero

    init(storage: PostgresSyncStorage, writes: BackendWrites, schema: Schema, log: SyncLogRecorder?, metrics: ServerMetrics, logger: Logger) {
        (self.storage, self.writes, self.schema, self.log, self.metrics, self.logger) = (storage, writes, schema, log, metrics, logger)
    }

    /// Until cancelled: drains the inbox at each signal (and at start, when the listener
    /// connects). After a failure (PostgreSQL unreachable, sync paused) it tries again after
    /// a delay growing from 1 s to 30 s: the only waking that is not an event, and only while
    /// writes are waiting.
    func run() async {
        for await _ in storage.capturedWriteSignals() {
            while !Task.isCancelled {
                if await drain() {
                    retryDelay = .zero
                    break
                }
                retryDelay = retryDelay == .zero ? .seconds(1) : min(retryDelay * 2, .seconds(30))
                do { try await Task.sleep(for: retryDelay) } catch { return }
            }
        }
    }

    /// Integrates every captured transaction; false when it stopped on a failure.
    func drain() async -> Bool {
        while !Task.isCancelled {
            let pending: [CapturedTransaction]
            do { pending = try await storage.capturedTransactions(limit: Self.batch) } catch {
                logger.warning("SQL writes: cannot read the inbox: \(error)")
                return false
            }
            if pending.isEmpty { return true }
            for t in pending {
                do { try await integrate(t) } catch let e as BackendWriteRefused {
                    logger.info("SQL writes: waiting, \(pending.count) or more transactions pending: \(e.message)")
                    return false
                } catch {
                    logger.warning("SQL writes: transaction \(t.id) not integrated yet (tried again later): \(error)")
                    return false
                }
            }
        }
        return true
    }

    private func integrate(_ t: CapturedTransaction) async throws {
        guard t.rowCount <= Self.maxRows else {
            // Only the keys are kept, a page at a time: what is put back.
            var keys: [ObjectKey] = []
            try await forEachPage(of: t) { keys += SQLWriteDecoding.keys($0, schema: schema) }
            try await refuse(t, keys: Array(Set(keys)), reason: "\(t.rowCount) rows in one transaction; Ferry integrates at most \(Self.maxRows): split it")
            return
        }
        var rows: [CapturedRow] = []
        try await forEachPage(of: t) { rows += $0 }
        guard !rows.isEmpty else { return }   // Another node took it.
        let decoded: SQLWriteDecoding.Decoded
        do { decoded = try SQLWriteDecoding.decode(rows, schema: schema) } catch let r as SQLWriteDecoding.Refusal {
            try await refuse(t, keys: SQLWriteDecoding.keys(rows, schema: schema), reason: r.message)
            return
        }
        let result: BackendWriteResult
        do {
            result = try await writes.writeCaptured(decoded.instructions, timestamp: t.writtenAtMicroseconds &* 1000, transaction: t.id, keys: decoded.keys)
        } catch let e as SessionFailure {
            if e.code == SyncHub.capturedWritesGoneCode { return }
            try await refuse(t, keys: decoded.keys, reason: e.message)
            return
        }
        metrics.sqlWrites(result: "integrated")
        log?.record(.sqlWrite, userId: BackendWrites.sqlWriter, connection: 0, "SQL transaction \(t.id) integrated at version \(result.version)",
                    details: [("transaction", .int(t.id)), ("rows", .int(Int64(rows.count))), ("instructions", .int(Int64(decoded.instructions.count))),
                              ("version", .int(Int64(bitPattern: result.version))), ("status", .string("integrated"))])
    }

    /// A transaction's rows, a page at a time, in the order written.
    private func forEachPage(of t: CapturedTransaction, _ body: ([CapturedRow]) -> Void) async throws {
        var after: Int64 = 0
        while true {
            let page = try await storage.capturedRows(of: t.id, after: after, limit: Self.page)
            body(page)
            guard let last = page.last, page.count == Self.page else { return }
            after = last.id
        }
    }

    /// Takes the transaction out of the inbox and puts the rows of `keys` back as the store
    /// has them; records why.
    private func refuse(_ t: CapturedTransaction, keys: [ObjectKey], reason: String) async throws {
        let taken = try await storage.writeTransaction { tx in try await tx.consumeCapturedWrites(transaction: t.id, restoring: keys) }
        guard taken else { return }
        metrics.sqlWrites(result: "refused")
        logger.warning("SQL writes: transaction \(t.id) refused (\(t.rowCount) rows, restored as the store has them): \(reason)")
        log?.record(.sqlWrite, userId: BackendWrites.sqlWriter, connection: 0, "SQL transaction \(t.id) refused: \(reason)",
                    details: [("transaction", .int(t.id)), ("rows", .int(Int64(t.rowCount))), ("status", .string("refused")), ("reason", .string(reason))])
    }
}
