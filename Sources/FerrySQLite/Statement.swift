import CSQLite
import FerryCore

/// A prepared statement with typed binds and reads.
public final class Statement {
    private var stmt: OpaquePointer?
    private unowned let connection: SQLiteConnection
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    public init(_ stmt: OpaquePointer, connection: SQLiteConnection) {
        self.stmt = stmt
        self.connection = connection
    }

    public func finalize() {
        sqlite3_finalize(stmt)
        stmt = nil
    }

    public func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    public func resetKeepingBindings() { sqlite3_reset(stmt) }

    public func bindNull(_ i: Int32) { sqlite3_bind_null(stmt, i) }
    public func bind(_ i: Int32, _ v: Int64) { sqlite3_bind_int64(stmt, i, v) }
    public func bind(_ i: Int32, _ v: Double) { sqlite3_bind_double(stmt, i, v) }

    // Lengths are passed as 64-bit values: SQLite refuses what is too big (SQLITE_TOOBIG, an
    // error from step) where an Int32 conversion would trap.
    public func bind(_ i: Int32, _ s: String) {
        var s = s
        s.withUTF8 { buf in
            if let base = buf.baseAddress {
                _ = sqlite3_bind_text64(stmt, i, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), UInt64(buf.count), Self.transient, UInt8(SQLITE_UTF8))
            } else {
                _ = sqlite3_bind_text(stmt, i, "", 0, Self.transient)
            }
        }
    }

    public func bind<C: ContiguousCollection>(_ i: Int32, blob: C) where C.Element == UInt8 {
        _ = blob.withContiguousStorage { buf in
            if buf.isEmpty { sqlite3_bind_zeroblob(stmt, i, 0) }
            else { sqlite3_bind_blob64(stmt, i, buf.baseAddress, UInt64(buf.count), Self.transient) }
        }
    }

    /// Binds text that stays valid until the statement has been stepped (SQLITE_STATIC: no copy).
    /// Only for statements whose every parameter is bound again before each step, so SQLite
    /// never reads the pointer after the caller's buffer is gone.
    public func bindTextNoCopy(_ i: Int32, _ utf8: UnsafeBufferPointer<UInt8>) {
        if let base = utf8.baseAddress, !utf8.isEmpty {
            _ = sqlite3_bind_text64(stmt, i, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), UInt64(utf8.count), nil, UInt8(SQLITE_UTF8))
        } else {
            _ = sqlite3_bind_text(stmt, i, "", 0, nil)
        }
    }

    /// The blob counterpart of `bindTextNoCopy`, with the same rule.
    public func bindBlobNoCopy(_ i: Int32, _ bytes: UnsafeRawBufferPointer) {
        if let base = bytes.baseAddress, !bytes.isEmpty { sqlite3_bind_blob64(stmt, i, base, UInt64(bytes.count), nil) }
        else { sqlite3_bind_zeroblob(stmt, i, 0) }
    }

    public func bind(_ i: Int32, raw: UnsafeRawBufferPointer) {
        if raw.isEmpty { sqlite3_bind_zeroblob(stmt, i, 0) }
        else { sqlite3_bind_blob64(stmt, i, raw.baseAddress, UInt64(raw.count), Self.transient) }
    }

    /// Steps once: true when a row is available, false when done.
    @discardableResult
    public func step() throws -> Bool {
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        let e = connection.error(rc, "statement failed")
        sqlite3_reset(stmt)
        throw e
    }

    /// Runs to completion, ignoring rows.
    public func run() throws {
        while try step() {}
    }

    public func isNull(_ col: Int32) -> Bool { sqlite3_column_type(stmt, col) == SQLITE_NULL }
    public func columnType(_ col: Int32) -> Int32 { sqlite3_column_type(stmt, col) }
    public func int64(_ col: Int32) -> Int64 { sqlite3_column_int64(stmt, col) }
    public func double(_ col: Int32) -> Double { sqlite3_column_double(stmt, col) }

    public func string(_ col: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, col) else { return "" }
        let n = Int(sqlite3_column_bytes(stmt, col))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    public func blob(_ col: Int32) -> [UInt8] {
        let p = sqlite3_column_blob(stmt, col)
        let n = Int(sqlite3_column_bytes(stmt, col))
        guard let p, n > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    package var changes: Int { connection.db.map { Int(sqlite3_changes($0)) } ?? 0 }
}

/// Contiguous byte storage, so that blobs bind without a copy whether they are arrays or slices.
public protocol ContiguousCollection: Collection {
    func withContiguousStorage<R>(_ body: (UnsafeBufferPointer<Element>) throws -> R) rethrows -> R
}
extension Array: ContiguousCollection {
    public func withContiguousStorage<R>(_ body: (UnsafeBufferPointer<Element>) throws -> R) rethrows -> R { try withUnsafeBufferPointer(body) }
}
extension ArraySlice: ContiguousCollection {
    public func withContiguousStorage<R>(_ body: (UnsafeBufferPointer<Element>) throws -> R) rethrows -> R { try withUnsafeBufferPointer(body) }
}
