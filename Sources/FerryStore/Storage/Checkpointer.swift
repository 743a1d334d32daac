import CSQLite
import FerryCore
import FerrySQLite
#if canImport(Glibc)
import Glibc
#endif

/// Moves WAL checkpoints (copying committed pages from the WAL into the database file) off the
/// committing thread: a commit that grew the WAL past `threshold` pages wakes a thread of the
/// store that checkpoints through its own connection (PASSIVE: it never blocks readers or the
/// writer). If the WAL still reaches `limit` pages, the committing thread checkpoints itself,
/// so the WAL stays bounded whatever the load.
final class Checkpointer: @unchecked Sendable {
    static let threshold: Int32 = 1000
    static let limit: Int32 = 16000

    private let connection: SQLiteConnection
    private let lock = ThreadLock()
    private var requested = false
    private var stopping = false
    private var thread: WorkerThread?

    init(name: String, description: String) throws {
        connection = try SQLiteConnection(path: name, flags: SQLITE_OPEN_READWRITE, description: description)
        do { thread = try WorkerThread(name: "ferry-checkpoint") { [self] in run() } } catch {
            connection.close()
            throw error
        }
    }

    /// Installs the hook on the writer that decides, after each commit, who checkpoints.
    func attach(to writer: SQLiteConnection) {
        writer.setWALHook(Unmanaged.passUnretained(self).toOpaque()) { context, db, _, pages in
            guard let context else { return SQLITE_OK }
            if pages >= Checkpointer.limit {
                sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            } else if pages >= Checkpointer.threshold {
                Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().request()
            }
            return SQLITE_OK
        }
    }

    private func request() {
        lock.withLock {
            requested = true
            lock.broadcast()
        }
    }

    private func run() {
        while true {
            let stop: Bool = lock.withLock {
                while !requested && !stopping { lock.wait() }
                requested = false
                return stopping
            }
            if stop { return }
            // A passive checkpoint that fails (busy, or the file closing) only leaves pages in
            // the WAL: the next request copies them, and a commit past the hard limit does.
            try? connection.exec("PRAGMA wal_checkpoint(PASSIVE)")
        }
    }

    /// Stops and joins the thread and closes its connection. Detach the hook first.
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
