import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// The lock that makes one process the sync agent of a file: an exclusive `flock` on a file
/// beside the database, held for as long as the store is open. The kernel drops it when the
/// process dies, so a crashed agent never blocks the next one.
final class SyncAgentLock {
    private var fd: Int32

    /// The lock, or nil when another process holds it.
    static func tryAcquire(databasePath: String) throws -> SyncAgentLock? {
        do { return try SyncAgentLock(databasePath: databasePath) } catch let e as FerryError where e.code == .multipleSyncAgents { return nil }
    }

    init(databasePath: String) throws {
        let lockPath = databasePath + ".sync-agent"
        fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw FerryError(.io, "cannot open the sync agent lock '\(lockPath)': \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let err = errno
            close(fd)
            fd = -1
            if err == EWOULDBLOCK {
                throw FerryError(.multipleSyncAgents,
                                 "'\(databasePath)' is a synced database and another process is its sync agent: open it without synced=true to read and write it (the agent uploads the commits), or through a sync session, which takes the role when that process goes")
            }
            throw FerryError(.io, "cannot lock '\(lockPath)': \(String(cString: strerror(err)))")
        }
    }

    func release() {
        if fd >= 0 {
            flock(fd, LOCK_UN)
            close(fd)
            fd = -1
        }
    }

    deinit { release() }
}
