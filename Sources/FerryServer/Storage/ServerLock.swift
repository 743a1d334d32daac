import Foundation

/// A mutex for the server's synchronous parts (the SQLite connection is not thread-safe).
final class ServerLock: @unchecked Sendable {
    private let lock = NSLock()
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

enum ServerClock {
    static func secondsSinceEpoch() -> Int { Int(Date().timeIntervalSince1970) }
    static func nanosecondsSinceEpoch() -> Int64 { Int64(Date().timeIntervalSince1970 * 1e9) }
}
