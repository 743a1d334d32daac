#if canImport(Glibc)
import Glibc
#endif
import CSQLite
import FerryCore
import FerrySQLite

extension Database {
    /// Writes a copy of this synced database, with its data and subscriptions, to a new file
    /// at `path` that any user's flexible sync configuration can open (SPEC F-COPY): the copy
    /// has no client file identity (the server gives it a new one on its first connection), no
    /// history and nothing acknowledged, so it uploads nothing of this file's past and syncs
    /// on from the server version this file had integrated.
    ///
    /// Only synced to synced: an unsynced database is refused, and so is a file with local
    /// changes the server has not acknowledged (they would belong to no one in the copy:
    /// wait for upload first). `path` must not exist.
    public func writeSyncedCopy(toPath path: String) throws {
        guard isSynced else {
            throw FerryError(.invalidArgument, "only a synced database can be copied for a sync configuration (this one is local)")
        }
        guard !path.isEmpty, !path.utf8.contains(0) else { throw FerryError(.invalidArgument, "the copy's path is empty or contains NUL") }
        guard access(path, F_OK) != 0 else { throw FerryError(.invalidArgument, "\(path) already exists: a copy needs a new file") }
        try readingStore { c in
            let s = try c.statement("VACUUM INTO ?")
            defer { s.resetKeepingBindings() }
            s.bind(1, copyTarget(path))
            try s.run()
        }
        do {
            let copy = try storeForSync.cipher?.connection(copyTarget(path), flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, description: path)
                ?? SQLiteConnection(creatingAt: path, description: path)
            defer { copy.close() }
            try copy.exec("BEGIN IMMEDIATE")
            do {
                // The copy is checked, not the source: it is the snapshot VACUUM took.
                let latest = try Self.copyScalar(copy, "SELECT COALESCE(MAX(version), 0) FROM __ferry_history")
                let acknowledged = try Self.copyScalar(copy, "SELECT COALESCE((SELECT value FROM __ferry_meta WHERE key = 'sync.acknowledged'), 0)")
                guard latest <= acknowledged else {
                    throw FerryError(.invalidArgument, "the database has local changes the server has not acknowledged yet: wait for upload, then copy it")
                }
                try copy.exec("""
                    DELETE FROM __ferry_meta WHERE key IN ('sync.ident', 'sync.salt', 'sync.acknowledged', 'sync.answered', 'receipts.forgotten');
                    DELETE FROM __ferry_history;
                    DROP TABLE IF EXISTS __ferry_receipt_rejections;
                    DROP TABLE IF EXISTS __ferry_receipt_aliases;
                    DELETE FROM __ferry_sync_bases;
                    DROP TABLE IF EXISTS __ferry_reset_download;
                    COMMIT;
                    """)
            } catch {
                copy.rollback()
                throw error
            }
        } catch {
            Self.removeFile(path)
            throw error
        }
    }

    private static func copyScalar(_ c: SQLiteConnection, _ sql: String) throws -> Int64 {
        let s = try c.statement(sql)
        defer { s.resetKeepingBindings() }
        _ = try s.step()
        return s.int64(0)
    }
}
