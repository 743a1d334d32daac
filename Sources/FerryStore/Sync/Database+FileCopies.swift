#if canImport(Glibc)
import Glibc
#endif
import FerryCore

/// Whole-file copies and moves, for backups and for client reset.
extension Database {
    /// Writes a consistent copy of the whole database (data, history, sync state) to a new file
    /// at `path`, e.g. a backup of the state before a client reset. The copy is an ordinary
    /// Ferry database file, encrypted with this file's key if it is encrypted. `path` must not
    /// exist.
    public func writeCopy(toPath path: String) throws {
        guard !path.isEmpty, !path.utf8.contains(0) else { throw FerryError(.invalidArgument, "the copy's path is empty or contains NUL") }
        guard access(path, F_OK) != 0 else { throw FerryError(.invalidArgument, "\(path) already exists: a copy needs a new file") }
        do {
            try readingStore { c in
                let s = try c.statement("VACUUM INTO ?")
                defer { s.resetKeepingBindings() }
                s.bind(1, copyTarget(path))
                try s.run()
            }
        } catch {
            Self.removeFile(path)
            throw error
        }
    }

    /// What VACUUM INTO writes to for a copy at `path`: the file through this store's page
    /// cipher when it is encrypted, so a copy never holds the data in the clear.
    func copyTarget(_ path: String) -> String { storeForSync.cipher?.uri(path) ?? path }

    /// Moves a database file that no handle of this process has open (with its WAL and
    /// shared-memory files) to `destination`, which must not exist.
    public static func moveFile(_ path: String, to destination: String) throws {
        guard !isOpenInThisProcess(path: path) else {
            throw FerryError(.invalidArgument, "\(path) is still open: close its sync session and every handle on it first")
        }
        guard access(destination, F_OK) != 0 else { throw FerryError(.invalidArgument, "\(destination) already exists") }
        guard rename(path, destination) == 0 else {
            throw FerryError(.io, "cannot move \(path) to \(destination): \(String(cString: strerror(errno)))")
        }
        for suffix in ["-wal", "-shm", "-journal"] where access(path + suffix, F_OK) == 0 {
            guard rename(path + suffix, destination + suffix) == 0 else {
                throw FerryError(.io, "cannot move \(path + suffix) to \(destination + suffix): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Removes a database file and its companions, if they exist.
    public static func removeFile(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }
}
