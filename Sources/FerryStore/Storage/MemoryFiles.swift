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
    private static let lock = ThreadLock()

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
            guard let name = name(of: entry), name.hasPrefix(prefix) else { continue }
            let rest = name.dropFirst(prefix.count)
            guard let pidText = rest.split(separator: "-").first, let pid = Int32(pidText), pid != me else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { unlink("\(directory)/\(name)") }
        }
    }

    /// The name of a directory entry that `readdir` returned. `d_name` is declared
    /// `char[256]`, but each record in glibc's buffer is only `d_reclen` bytes long, the name
    /// ending at its NUL: reading the whole array (as loading the Swift tuple
    /// `entry.pointee.d_name` does) runs past the record, and for the last record of a full
    /// buffer past the buffer, into whatever follows it, an unmapped page included (SIGSEGV
    /// with a few hundred files in /dev/shm). So the name is read in place, within its record.
    static func name(of entry: UnsafePointer<dirent>) -> String? {
        guard let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name),
              let lengthOffset = MemoryLayout<dirent>.offset(of: \dirent.d_reclen) else { return nil }
        let record = UnsafeRawPointer(entry)
        let recordLength = Int(record.load(fromByteOffset: lengthOffset, as: UInt16.self))
        guard recordLength > nameOffset else { return nil }
        let name = (record + nameOffset).assumingMemoryBound(to: CChar.self)
        let length = strnlen(name, recordLength - nameOffset)
        return String(decoding: UnsafeRawBufferPointer(start: name, count: length), as: UTF8.self)
    }
}
