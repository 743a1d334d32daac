#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A mutual-exclusion lock for short critical sections shared by the host's threads and the
/// loop thread.
///
/// A pthread mutex rather than the standard library's `Mutex`: on Linux `Mutex` takes its
/// contended path inside the uninstrumented Synchronization library, so ThreadSanitizer misses
/// the hand-off and reports races between two critical sections of the same lock (CI saw one
/// on `SyncSession.observeConnectionState`). ThreadSanitizer intercepts pthread mutexes.
public final class ThreadLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init() { pthread_mutex_init(mutex, nil) }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
