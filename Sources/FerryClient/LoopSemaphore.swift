#if canImport(Glibc)
import Glibc
#endif

/// A one-shot semaphore to wait for the loop thread.
final class LoopSemaphore: @unchecked Sendable {
    private var sem = sem_t()
    init() { sem_init(&sem, 0, 0) }
    deinit { sem_destroy(&sem) }
    func signal() { sem_post(&sem) }
    func wait() { while sem_wait(&sem) != 0 {} }
}
