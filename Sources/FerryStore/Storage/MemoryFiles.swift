import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// Where in-memory databases live: SQLite files on /dev/shm (tmpfs: memory, never disk), so
/// they get WAL and its concurrent readers like file databases. Each store gets its own name
/// (the registry maps identifiers to stores); the files are removed when the store closes,
/// and files left by a process that died are removed by the next process that makes one.
/// Without a writable /dev/shm, SQLite's `memdb` is used instead, where a write transaction
/// makes other handles' reads wait for it.
enum MemoryFiles {
    static let directory = "/dev/shm"
    nonisolated(unsafe) private static var counter: UInt64 = 0
    private static let lock = Lock()

    static var isAvailable: Bool { access(directory, W_OK | X_OK) == 0 }

    private static var prefix: String { "ferry-\(getuid())-" }

    /// A fresh path for a new in-memory store. Every new store first sweeps the files of
    /// dead processes (one directory read; in-memory databases are not opened in hot loops).
    static func newPath() -> String {
        lock.withLock {
            sweepStale()
            counter += 1
            return "\(directory)/\(prefix)\(getpid())-\(counter)-\(UInt32.random(in: 0...UInt32.max)).db"
        }
    }

    static func remove(_ path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    /// Removes the files of processes that no longer exist.
    private static func sweepStale() {
        guard let dir = opendir(directory) else { return }
        defer { closedir(dir) }
        let me = getpid()
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String in
                guard let base = raw.baseAddress else { return "" }
                return String(cString: base.assumingMemoryBound(to: CChar.self))
            }
            guard name.hasPrefix(prefix) else { continue }
            let rest = name.dropFirst(prefix.count)
            guard let pidText = rest.split(separator: "-").first, let pid = Int32(pidText), pid != me else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { unlink("\(directory)/\(name)") }
        }
    }
}
