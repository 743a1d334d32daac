import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// Delivers notifications on the host's thread: work queues up, a pipe becomes readable,
/// and `deliver()` runs the queue on whichever thread calls it.
public final class PollingScheduler: NotificationScheduler, @unchecked Sendable {
    private let lock = ThreadLock()
    private var queue: [@Sendable () -> Bool] = []
    private var signalled = false
    /// The read end, which the host polls; the write end is written once per wake-up.
    public let fileDescriptor: Int32
    private let writeEnd: Int32

    public init() throws {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else {
            throw FerryError(.io, "cannot create the notification descriptor: \(String(cString: strerror(errno)))")
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        fileDescriptor = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(fileDescriptor)
        close(writeEnd)
    }

    public func schedule(_ work: @escaping @Sendable () -> Bool) {
        let wake: Bool = lock.withLock {
            queue.append(work)
            defer { signalled = true }
            return !signalled
        }
        if wake {
            var one: UInt8 = 1
            _ = write(writeEnd, &one, 1)
        }
    }

    /// Runs what is queued; returns how many host callbacks ran.
    public func deliver() -> Int {
        let work = lock.withLock { () -> [@Sendable () -> Bool] in
            var buffer = [UInt8](repeating: 0, count: 64)
            while read(fileDescriptor, &buffer, 64) > 0 {}
            signalled = false
            let w = queue
            queue.removeAll()
            return w
        }
        var callbacks = 0
        for w in work where w() { callbacks += 1 }
        return callbacks
    }

    public func shutdown() { lock.withLock { queue.removeAll() } }
}
