import CFerryCipher
import CSQLite
import FerryCore
import FerrySQLite
#if canImport(Glibc)
import Glibc
#endif

extension Database {
    /// Encrypts, decrypts or re-keys the database file at `path` (SPEC goal: encryption at
    /// rest; docs/encryption.md): `oldKey` opens it as it is (nil: it is not encrypted), and
    /// `newKey` is the key of the result (nil: not encrypted). The file is rewritten beside
    /// itself (`VACUUM INTO`) and moved over the original only once complete, so a failure or
    /// a crash leaves the original as it was.
    ///
    /// No handle of this process may have the file open, nor should any other process: the
    /// write lock is held during the copy, so a writer elsewhere makes this fail with `.busy`
    /// instead of losing its writes, and a file still open elsewhere at the end is refused.
    public static func changeKey(path: String, oldKey: EncryptionKey?, newKey: EncryptionKey?) throws {
        guard case .file(let canonical) = try StoreLocation.canonicalFile(path) else {
            throw FerryError(.invalidArgument, "a key can only be changed on a file")
        }
        try convert(path: canonical, oldKey: oldKey, newKey: newKey, requireFerryFile: true, description: "'\(canonical)'")
    }

    /// `changeKey` of any SQLite file (`requireFerryFile` false: the user cache too).
    static func convert(path canonical: String, oldKey: EncryptionKey?, newKey: EncryptionKey?, requireFerryFile: Bool,
                        description display: String) throws {
        guard !isOpenInThisProcess(path: canonical) else {
            throw FerryError(.invalidArgument, "\(display) is open: close every handle on it first")
        }
        guard PageCipher.probe(canonical) != .empty else {
            throw FerryError(.invalidArgument, "\(display) does not exist or is empty: there is nothing to convert")
        }
        try PageCipher.checkKey(path: canonical, hasKey: oldKey != nil, description: display)
        let oldCipher = try oldKey.map { try PageCipher(key: $0) }
        let newCipher = try newKey.map { try PageCipher(key: $0) }
        defer {
            oldCipher?.destroy()
            newCipher?.destroy()
        }
        let temporary = canonical + ".ferry-rekey"
        removeFile(temporary)
        let source = oldCipher?.uri(canonical) ?? StoreLocation.uri(path: canonical)
        let target = newCipher?.uri(temporary) ?? PageCipher.plainURI(temporary)
        do {
            let reader = try oldCipher?.connection(source, flags: SQLITE_OPEN_READWRITE, description: display)
                ?? SQLiteConnection(path: source, flags: SQLITE_OPEN_READWRITE, description: display)
            defer { reader.close() }
            let guardian = try oldCipher?.connection(source, flags: SQLITE_OPEN_READWRITE, description: display)
                ?? SQLiteConnection(path: source, flags: SQLITE_OPEN_READWRITE, description: display)
            defer { guardian.close() }
            // Before anything is read, so the copy gets room for the nonces and tags.
            if newKey != nil, let db = reader.db { _ = fcipher_reserve(db) }
            try guardian.exec("BEGIN IMMEDIATE")
            defer { guardian.rollback() }
            let meta = try reader.statement("SELECT count(*) FROM sqlite_master WHERE name = '__ferry_meta'")
            guard try meta.step(), meta.int64(0) == 1 || !requireFerryFile else {
                meta.reset()
                throw FerryError(.corrupt, "\(display) is not a Ferry database")
            }
            meta.reset()
            let vacuum = try reader.statement("VACUUM INTO ?")
            vacuum.bind(1, target)
            defer { vacuum.reset() }
            try vacuum.run()
        } catch {
            removeFile(temporary)
            throw error
        }
        // The connections are closed: the last one checkpointed and removed the WAL, unless
        // another process still has the file open.
        guard access(canonical + "-wal", F_OK) != 0 else {
            removeFile(temporary)
            throw FerryError(.busy, "\(display) is open in another process: close it there first")
        }
        guard rename(temporary, canonical) == 0 else {
            let message = String(cString: strerror(errno))
            removeFile(temporary)
            throw FerryError(.io, "cannot replace \(display) with its converted copy: \(message)")
        }
        unlink(canonical + "-shm")
    }
}
