#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ferry's one lock: a pthread mutex with a condition variable, for short critical sections
/// shared by the host's threads, the loop thread, the store's threads and the server's tasks
/// (never held across a suspension point). The client's store waits on it (for the write lock,
/// for a checkpoint request), which the standard library's `Mutex` cannot do.
///
/// A pthread mutex rather than `Mutex` or `NSLock`: on Linux `Mutex` takes its contended path
/// inside the uninstrumented Synchronization library, so ThreadSanitizer misses the hand-off and
/// reports races between two critical sections of the same lock (CI saw one on
/// `SyncSession.observeConnectionState`). ThreadSanitizer intercepts pthread mutexes.
/// Allocated once, so its address never moves.
public final class ThreadLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits on the condition; call with the lock held.
    public func wait() { pthread_cond_wait(cond, mutex) }
    public func broadcast() { pthread_cond_broadcast(cond) }
    /// Wakes one waiter (hold the lock).
    public func signal() { pthread_cond_signal(cond) }

    /// Waits until broadcast or until `milliseconds` pass (callers re-check their condition).
    public func wait(milliseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Int(now.tv_nsec) + milliseconds * 1_000_000
        var deadline = timespec(tv_sec: now.tv_sec + total / 1_000_000_000, tv_nsec: total % 1_000_000_000)
        pthread_cond_timedwait(cond, mutex, &deadline)
    }
}

/// A value behind a `ThreadLock`, for state shared by tasks and threads.
public final class LockedValue<Value>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try lock.withLock { try body(&value) }
    }
}
