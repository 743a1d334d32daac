import Foundation

/// A mutex for the store's synchronous parts (a SQLite connection is not thread-safe). Never
/// held across a suspension point.
final class ServerLock: @unchecked Sendable {
    private let lock = NSLock()
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
