#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with a condition variable: the store needs to wait (for the write lock),
/// which `Synchronization.Mutex` cannot do. Allocated once so its address never moves.
final class Lock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let cond = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(cond, nil)
    }

    deinit {
        pthread_cond_destroy(cond)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        cond.deallocate()
    }

    func lock() { pthread_mutex_lock(mutex) }
    func unlock() { pthread_mutex_unlock(mutex) }

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Waits on the condition; call with the lock held.
    func wait() { pthread_cond_wait(cond, mutex) }
    func broadcast() { pthread_cond_broadcast(cond) }

    /// Waits until broadcast or until `milliseconds` pass (callers re-check their condition).
    func wait(milliseconds: Int) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Int(now.tv_nsec) + milliseconds * 1_000_000
        var deadline = timespec(tv_sec: now.tv_sec + total / 1_000_000_000, tv_nsec: total % 1_000_000_000)
        pthread_cond_timedwait(cond, mutex, &deadline)
    }
}

/// The identity of the calling thread, to detect a wait that would deadlock.
func currentThreadID() -> UInt { UInt(bitPattern: Int(pthread_self())) }
