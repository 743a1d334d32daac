import FerryCore
import FerrySQLite
#if canImport(Glibc)
import Glibc
#endif

/// Tells this process what other processes committed to a synced file it has open (SPEC
/// F-MULTIPROC): a thread of the store looks at `PRAGMA data_version` through a connection of
/// its own every `interval` milliseconds; when it moved, it reads what is new since its last
/// look and hands it to the store's observers, and tells the sync engine, which uploads the
/// other processes' local writes when this process is the sync agent.
///
/// What it reads: local writes of any process are in the history (`__ferry_history`, one
/// changeset per transaction); what the sync agent downloaded is in the change log
/// (`__ferry_change_log`, `Store.logChanges`). Entries this process wrote itself were
/// published when committed and are skipped. The log keeps the last `logWindow` entries: a
/// process that did not look for that many sync transactions misses the older ones'
/// modification details (its query observers still see the new results at the next change).
final class ExternalChangeWatcher: @unchecked Sendable {
    static let interval = 20
    static let logWindow: UInt64 = 4096

    private weak var store: Store?
    private let connection: SQLiteConnection
    private let lock = ThreadLock()
    private var stopping = false
    private var thread: WorkerThread?
    private var dataVersion: Int64 = -1
    private var lastHistory: UInt64 = 0
    private var lastChangeLog: UInt64 = 0

    /// Starts watching from the file's state now. Throws when the thread or its connection
    /// cannot start (the process then does not hear of other processes' commits; it still
    /// works, and the sync engine logs what that costs).
    init(store: Store, connection: SQLiteConnection) throws {
        self.store = store
        self.connection = connection
        do {
            dataVersion = try connection.dataVersion()
            (lastHistory, lastChangeLog) = try Self.heads(connection)
        } catch {
            connection.close()
            throw error
        }
        do { thread = try WorkerThread(name: "ferry-watcher") { [self] in run() } } catch {
            connection.close()
            throw FerryError(.internal, "cannot start a thread to watch for other processes' commits: \((error as? FerryError)?.message ?? "\(error)")")
        }
    }

    private static func heads(_ c: SQLiteConnection) throws -> (UInt64, UInt64) {
        let h = try c.statement("SELECT COALESCE(MAX(version), 0) FROM __ferry_history")
        defer { h.resetKeepingBindings() }
        _ = try h.step()
        let history = UInt64(bitPattern: h.int64(0))
        guard try hasChangeLog(c) else { return (history, 0) }
        let l = try c.statement("SELECT COALESCE(MAX(seq), 0) FROM __ferry_change_log")
        defer { l.resetKeepingBindings() }
        _ = try l.step()
        return (history, UInt64(bitPattern: l.int64(0)))
    }

    private static func hasChangeLog(_ c: SQLiteConnection) throws -> Bool {
        let s = try c.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__ferry_change_log'")
        defer { s.resetKeepingBindings() }
        return try s.step()
    }

    private func run() {
        while true {
            let stop: Bool = lock.withLock {
                if !stopping { lock.wait(milliseconds: Self.interval) }
                return stopping
            }
            if stop { return }
            look()
        }
    }

    /// One look: nothing to do unless another connection committed.
    private func look() {
        guard let store else { return }
        do {
            let v = try connection.dataVersion()
            guard v != dataVersion else { return }
            // The positions move only once what they cover is published: a look that fails
            // (a busy or closing file) is done again whole at the next tick.
            var (lastHistory, lastChangeLog) = (self.lastHistory, self.lastChangeLog)
            var changes = CommittedChanges([])
            var foreignWrites = false
            try connection.exec("BEGIN")
            // A read transaction: ending it only releases the read lock, so it cannot fail in a
            // way that matters (the next BEGIN would report a connection that went bad).
            defer { connection.rollback() }
            let h = try connection.statement("SELECT version, changeset FROM __ferry_history WHERE version > ? ORDER BY version")
            h.bind(1, Int64(bitPattern: lastHistory))
            while try h.step() {
                let version = UInt64(bitPattern: h.int64(0))
                lastHistory = max(lastHistory, version)
                if store.takeOwn(history: version) { continue }
                foreignWrites = true
                // A changeset that does not decode (a damaged file) never will: reading it again
                // cannot help. Its objects' observers miss this change; the upload path, which
                // decodes the same row, reports the damage as an error.
                if let cs = try? ChangesetCodec.decode(h.blob(1)) { changes.merge(CommittedChanges(cs.instructions)) }
            }
            h.resetKeepingBindings()
            if try Self.hasChangeLog(connection) {
                let l = try connection.statement("SELECT seq, changes FROM __ferry_change_log WHERE seq > ? ORDER BY seq")
                l.bind(1, Int64(bitPattern: lastChangeLog))
                while try l.step() {
                    let seq = UInt64(bitPattern: l.int64(0))
                    lastChangeLog = max(lastChangeLog, seq)
                    if store.takeOwn(changeLog: seq) { continue }
                    // As above: a row that does not decode never will.
                    if let logged = try? ChangeLogCodec.decode(l.blob(1)) { changes.merge(logged) }
                }
                l.resetKeepingBindings()
            }
            (self.lastHistory, self.lastChangeLog, dataVersion) = (lastHistory, lastChangeLog, v)
            store.publishExternal(changes)
            if foreignWrites { store.notifyCommitListeners() }
        } catch {
            // A busy or closing file: the next look tries again.
        }
    }

    /// Stops and joins the thread and closes its connection.
    func stop() {
        guard let worker = thread else { return }
        thread = nil
        lock.withLock {
            stopping = true
            lock.broadcast()
        }
        worker.join()
        connection.close()
    }
}
