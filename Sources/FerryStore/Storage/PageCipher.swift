import CFerryCipher
import CSQLite
import FerryCore
import FerrySQLite

/// One encrypted store's page cipher: an SQLite VFS of its own (CFerryCipher) that holds the
/// keys derived from the host's key, registered while the store is open. Every connection of
/// the store opens its file through it (`?vfs=` in the URI), so the database file and its WAL
/// are sealed page by page, under the file's own page key.
final class PageCipher: @unchecked Sendable {
    private var handle: OpaquePointer?
    let vfsName: String

    init(key: EncryptionKey) throws {
        var h: OpaquePointer?
        let rc = fcipher_create(&h, key.keys)
        guard rc == SQLITE_OK, let h else { throw FerryError(.io, "cannot set up encryption (SQLite error \(rc))") }
        handle = h
        vfsName = String(cString: fcipher_vfs_name(h))
    }

    deinit { destroy() }

    /// Unregisters the VFS and zeroes the keys; every connection through it must be closed.
    func destroy() {
        fcipher_destroy(handle)
        handle = nil
    }

    func matches(_ key: EncryptionKey) -> Bool { handle.map { fcipher_same_keys($0, key.keys) == 1 } ?? false }

    /// The URI that opens `path` through this cipher.
    func uri(_ path: String) -> String { StoreLocation.uri(path: path) + "?vfs=" + vfsName }

    /// The URI that opens `path` without encryption even from a connection of an encrypted
    /// file (an ATTACH or VACUUM INTO target would otherwise use that connection's VFS).
    static func plainURI(_ path: String) -> String {
        let name = sqlite3_vfs_find(nil).map { String(cString: $0.pointee.zName) } ?? "unix"
        return StoreLocation.uri(path: path) + "?vfs=" + name
    }

    /// Opens a connection through this cipher. SQLite reads the file's header while opening,
    /// so a wrong key can fail the open itself: the cipher says why.
    func connection(_ name: String, flags: Int32, description: String) throws -> SQLiteConnection {
        let c: SQLiteConnection
        do {
            c = try SQLiteConnection(path: name, flags: flags, description: description)
        } catch {
            throw failure(description) ?? error
        }
        do {
            try prepare(c, description: description)
        } catch {
            c.close()
            throw error
        }
        return c
    }

    /// Sets a connection up for encryption: new files reserve room for each page's nonce and
    /// tag, temporary data stays in memory (SQLite's temporary files are not encrypted: the
    /// cipher refuses to open one), and failures are explained by what the cipher saw.
    func prepare(_ c: SQLiteConnection, description: String) throws {
        c.explainFailure = { [weak self] in self?.failure(description) }
        guard let db = c.db else { throw FerryError(.closed, "the connection is closed") }
        _ = fcipher_reserve(db)
        try c.exec("PRAGMA temp_store=MEMORY")
        // SQLite ignores the pragma when it was built to keep temporary data in files
        // (SQLITE_TEMP_STORE=0): every sort or temporary table would then fail.
        let setting = try c.statement("PRAGMA temp_store")
        defer { setting.reset() }
        guard try setting.step(), setting.int64(0) == 2, sqlite3_compileoption_used("TEMP_STORE=0") == 0 else {
            throw FerryError(.io, "cannot keep \(description)'s temporary data in memory (this SQLite keeps it in files, which would not be encrypted)")
        }
    }

    /// Why the last page read failed, as an error for a person; nil when the cipher saw nothing.
    func failure(_ description: String) -> FerryError? {
        guard let handle else { return nil }
        var offset: Int64 = 0
        var inWAL: Int32 = 0
        switch Int(fcipher_take_failure(handle, &offset, &inWAL)) {
        case Int(FCIPHER_FAIL_AUTH):
            if offset == 0 && inWAL == 0 {
                return FerryError(.decrypt, "the key does not decrypt \(description): its first page fails authentication (a wrong key, or a damaged file)")
            }
            return FerryError(.decrypt, "the page at byte \(offset) of \(description)\(inWAL != 0 ? "'s WAL" : "") fails authentication: the file was changed or damaged")
        case Int(FCIPHER_FAIL_NOT_ENCRYPTED):
            return FerryError(.decrypt, "\(description) is not encrypted: convert it with ferry_db_change_key before opening it with a key")
        case Int(FCIPHER_FAIL_FORMAT):
            return FerryError(.corrupt, "\(description) is not an encrypted Ferry database (its header is not one)")
        case Int(FCIPHER_FAIL_TEMPORARY):
            return FerryError(.io, "SQLite asked for a temporary file for \(description), which would not be encrypted: refused (temporary data must stay in memory)")
        default:
            return nil
        }
    }

    /// What the start of a file says about its encryption, read without SQLite.
    enum Probe { case empty, plain, encrypted, other }

    static func probe(_ path: String) -> Probe {
        switch Int(fcipher_probe(path)) {
        case Int(FCIPHER_PROBE_PLAIN): return .plain
        case Int(FCIPHER_PROBE_ENCRYPTED): return .encrypted
        case Int(FCIPHER_PROBE_OTHER): return .other
        default: return .empty
        }
    }

    /// The format version of an encrypted file (`FCIPHER_FORMAT_V1` or `_V2`), read from its
    /// first bytes without the key; nil for a file that is not encrypted.
    static func formatVersion(_ path: String) -> Int? {
        var version: Int32 = 0
        guard fcipher_probe_format(path, &version) == FCIPHER_PROBE_ENCRYPTED else { return nil }
        return Int(version)
    }

    /// Refuses, before SQLite sees the file, a key for an unencrypted file and no key for an
    /// encrypted one, with messages that say so.
    static func checkKey(path: String, hasKey: Bool, description: String) throws {
        switch (probe(path), hasKey) {
        case (.plain, true):
            throw FerryError(.decrypt, "\(description) is not encrypted: convert it with ferry_db_change_key before opening it with a key")
        case (.encrypted, false):
            throw FerryError(.decrypt, "\(description) is encrypted: open it with its key")
        default: return
        }
    }
}
