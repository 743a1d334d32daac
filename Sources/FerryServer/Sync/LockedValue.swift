import FerryCore

/// A value behind a pthread mutex (FerryCore's `ThreadLock`), for state shared by a
/// connection's tasks and NIO's threads. Not the standard library's `Mutex`: on Linux its
/// contended path parks inside the uninstrumented Synchronization library, so
/// ThreadSanitizer misses the hand-off and reports races between two critical sections of the
/// same lock (the client had exactly that false report in CI); TSan intercepts pthread mutexes.
final class LockedValue<Value>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try lock.withLock { try body(&value) }
    }
}
