import CSQLite
#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// One SQLite connection. Every call into SQLite goes through this file and `Statement`, so
/// there is one place that maps SQLite's failures to `FerryError`s. Not thread-safe: the
/// store guards each connection with its own lock.
public final class SQLiteConnection {
    package private(set) var db: OpaquePointer?
    private var cache: [String: Statement] = [:]
    /// Statements the store uses on hot paths, by a small integer key (hashing an Int is much
    /// cheaper than hashing the SQL text on every insert).
    private var keyed: [Int: Statement] = [:]
    package let description: String
    /// Explains a failure that SQLite only reports as an I/O error or a damaged file, such as a
    /// page of an encrypted file that does not decrypt (the store's page cipher knows why).
    package var explainFailure: (() -> FerryError?)?

    private static let configured: Bool = {
        _ = ferry_sqlite_disable_memstatus()
        return true
    }()

    public init(path: String, flags: Int32, description: String) throws {
        _ = Self.configured
        self.description = description
        if flags & SQLITE_OPEN_CREATE != 0 { Self.createPrivately(path) }
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { FileDescriptorLimit.explanation(errno: sqlite3_system_errno($0)) ?? String(cString: sqlite3_errmsg($0)) }
                ?? "out of memory"
            sqlite3_close_v2(handle)
            throw FerryError(.io, "cannot open \(description): \(message)")
        }
        db = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, 10_000)
    }

    /// Creates the file `name` names (a path or a `file:` URI) empty with mode 0600 when it
    /// does not exist: the files Ferry creates hold users' data and tokens (issue 22, point 8).
    /// SQLite would create it with 0644 less the umask, and creates the `-wal`, `-shm` and
    /// journal files with the database file's mode, so they are private too. In-memory
    /// databases (`:memory:`, the `memdb` VFS) are left alone.
    static func createPrivately(_ name: String) {
        var path = Substring(name)
        if path.hasPrefix("file:") {
            path = path.dropFirst(5)
            if let q = path.firstIndex(of: "?") {
                if path[q...].contains("vfs=memdb") { return }
                path = path[..<q]
            }
            guard let decoded = percentDecoded(path) else { return }
            path = Substring(decoded)
        }
        guard !path.isEmpty, path != ":memory:" else { return }
        let fd = open(String(path), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 { Glibc.close(fd) }
    }

    private static func percentDecoded(_ s: Substring) -> String? {
        var out: [UInt8] = []
        var bytes = Array(s.utf8)[...]
        while let b = bytes.popFirst() {
            guard b == UInt8(ascii: "%") else { out.append(b); continue }
            guard bytes.count >= 2, let v = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16) else { return nil }
            out.append(v)
            bytes = bytes.dropFirst(2)
        }
        return String(validating: out, as: UTF8.self)
    }

    /// Opens (creating if needed) a file for reading and writing: for callers outside the
    /// store, such as the server's storage, which do not import SQLite's constants.
    public convenience init(creatingAt path: String, description: String) throws {
        try self.init(path: path, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, description: description)
    }

    /// Opens an existing file read-only: a second connection that reads a consistent snapshot
    /// beside the writer (WAL), such as the server's view evaluation.
    public convenience init(readingAt path: String, description: String) throws {
        try self.init(path: path, flags: SQLITE_OPEN_READONLY, description: description)
    }

    deinit { close() }

    public func close() {
        for s in cache.values { s.finalize() }
        for s in keyed.values { s.finalize() }
        cache.removeAll()
        keyed.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    public func error(_ rc: Int32, _ what: String) -> FerryError {
        if [SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_NOTADB].contains(rc & 0xff), let e = explainFailure?() {
            return FerryError(e.code, "\(what): \(e.message)")
        }
        if let e = descriptorError(rc, what) { return e }
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
        switch rc & 0xff {
        case SQLITE_BUSY, SQLITE_LOCKED: return FerryError(.busy, "\(what): the database is locked by another process (\(message))")
        case SQLITE_NOTADB, SQLITE_CORRUPT: return FerryError(.corrupt, "\(what): \(description) is not a Ferry database or is damaged (\(message))")
        case SQLITE_NOMEM: return FerryError(.noMemory, "\(what): out of memory")
        case SQLITE_CONSTRAINT: return FerryError(.duplicatePrimaryKey, "\(what): \(message)")
        default: return FerryError(.io, "\(what): \(message)")
        }
    }

    /// SQLite says "unable to open database file" when a connection cannot open its WAL or
    /// shared-memory file for want of file descriptors: this says so.
    private func descriptorError(_ rc: Int32, _ what: String) -> FerryError? {
        guard [SQLITE_CANTOPEN, SQLITE_IOERR].contains(rc & 0xff), let db,
              let descriptors = FileDescriptorLimit.explanation(errno: sqlite3_system_errno(db)) else { return nil }
        return FerryError(.io, "\(what): cannot open a file of \(description): \(descriptors)")
    }

    /// Ends the open transaction, undoing it: after an error (the error is what the caller
    /// reports), or to end a transaction that only read. The rollback's own failure changes
    /// nothing, so it is not thrown: SQLite fails a ROLLBACK only when no transaction
    /// is open (it rolls back by itself after some errors, such as SQLITE_FULL or an I/O error),
    /// or when the connection is closed, and then there is nothing left to undo either way.
    public func rollback() {
        guard let db else { return }
        _ = sqlite3_exec(db, "ROLLBACK", nil, nil, nil)
    }

    /// Runs one or more statements that return no rows.
    public func exec(_ sql: String) throws {
        guard let db else { throw FerryError(.closed, "the connection is closed") }
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(err)
            if let e = descriptorError(rc, "SQL failed") { throw e }
            var e = error(rc, "SQL failed")
            if e.code == .io { e = FerryError(.io, "SQL failed: \(message)") }
            throw e
        }
    }

    /// `PRAGMA data_version`: changes when another connection (of this or another process)
    /// commits to the file, never for this connection's own commits.
    public func dataVersion() throws -> Int64 {
        let s = try statement("PRAGMA data_version")
        defer { s.resetKeepingBindings() }
        guard try s.step() else { throw FerryError(.io, "PRAGMA data_version returned no row") }
        return s.int64(0)
    }

    /// A prepared statement, cached by its text, reset and unbound for reuse.
    public func statement(_ sql: String) throws -> Statement {
        if let s = cache[sql] {
            s.reset()
            return s
        }
        let s = try prepare(sql)
        cache[sql] = s
        return s
    }

    /// A prepared statement cached under `key`; `sql` is only evaluated the first time.
    /// Callers bind every parameter (old bindings are never cleared) and reset the statement
    /// when done with it (`defer { s.resetKeepingBindings() }`), so it is ready here as it is.
    public func statement(key: Int, _ sql: @autoclosure () -> String) throws -> Statement {
        if let s = keyed[key] { return s }
        let s = try prepare(sql())
        keyed[key] = s
        return s
    }

    private func prepare(_ sql: String) throws -> Statement {
        guard let db else { throw FerryError(.closed, "the connection is closed") }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, "cannot prepare statement") }
        return Statement(stmt, connection: self)
    }

    /// Sets (or with nil, removes) the hook SQLite calls after each commit in WAL mode; it
    /// replaces SQLite's own automatic checkpoints.
    public func setWALHook(_ context: UnsafeMutableRawPointer?,
                    _ hook: (@convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32)?) {
        guard let db else { return }
        sqlite3_wal_hook(db, hook, context)
    }

    package var isInTransaction: Bool { db.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    /// The rowid of the last row this connection inserted (a commit's history version).
    package var lastInsertRowID: Int64 { db.map { sqlite3_last_insert_rowid($0) } ?? 0 }
}
