import Synchronization

/// A tiny mutual-exclusion lock for short critical sections in FerryCore, which has no
/// platform dependency beyond the standard library's Synchronization module.
public final class SpinLock: @unchecked Sendable {
    public init() {}
    private let mutex = Mutex<Void>(())
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        try mutex.withLock { _ in try body() }
    }
}
