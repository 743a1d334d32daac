import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// Where a store lives: a file, or a named in-memory database. `key` identifies the store in
/// this process, so every handle on one file shares one store.
enum StoreLocation {
    case file(path: String)
    case memory(identifier: String)

    var key: String {
        switch self {
        case .file(let p): return "file:" + p
        case .memory(let id): return "memory:" + id
        }
    }

    var isMemory: Bool { if case .memory = self { return true } else { return false } }

    /// The SQLite URI of a file (connections are opened with SQLITE_OPEN_URI).
    static func uri(path p: String) -> String {
        // Percent-encode what URIs reserve and every non-ASCII byte (SQLite decodes %XX).
        var out: [UInt8] = Array("file:".utf8)
        let hex = Array("0123456789ABCDEF".utf8)
        for b in p.utf8 {
            if b >= 0x80 || b == UInt8(ascii: "%") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") {
                out += [UInt8(ascii: "%"), hex[Int(b >> 4)], hex[Int(b & 15)]]
            } else {
                out.append(b)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// SQLite's shared `memdb` name for an in-memory database, when /dev/shm is not available.
    static func memdbName(_ id: String) -> String {
        "file:/ferry-" + id.utf8.map { String($0, radix: 16) }.joined(separator: "-") + "?vfs=memdb"
    }

    var displayName: String {
        switch self {
        case .file(let p): return "'\(p)'"
        case .memory(let id): return "in-memory database '\(id)'"
        }
    }

    /// A file location with its directory resolved, so two spellings of one path share a store.
    static func canonicalFile(_ path: String) throws -> StoreLocation {
        guard !path.isEmpty else { throw FerryError(.invalidArgument, "the database path is empty") }
        guard !path.utf8.contains(0) else { throw FerryError(.invalidArgument, "the database path contains NUL") }
        let bytes = Array(path.utf8)
        let slash = bytes.lastIndex(of: UInt8(ascii: "/"))
        let dir = slash.map { $0 == 0 ? "/" : String(decoding: bytes[..<$0], as: UTF8.self) } ?? "."
        let base = slash.map { String(decoding: bytes[($0 + 1)...], as: UTF8.self) } ?? path
        guard !base.isEmpty, base != ".", base != ".." else { throw FerryError(.invalidArgument, "the database path '\(path)' names a directory") }
        guard let resolved = realpath(dir, nil) else {
            throw FerryError(.io, "cannot open '\(path)': directory '\(dir)': \(String(cString: strerror(errno)))")
        }
        defer { free(resolved) }
        let d = String(cString: resolved)
        return .file(path: (d == "/" ? "" : d) + "/" + base)
    }
}
