import FerryCore
import FerryStore

/// Delivers a database's notifications on Ferry's shared event loop thread. Each scheduler
/// holds the shared loop for as long as its database handle lives.
public final class LoopScheduler: NotificationScheduler, @unchecked Sendable {
    private let loop: EventLoop
    private let lock = ThreadLock()
    private var active = true

    public init() throws { loop = try EventLoop.acquireShared() }

    public func schedule(_ work: @escaping @Sendable () -> Bool) {
        guard lock.withLock({ active }) else { return }
        loop.post { _ = work() }
    }

    public func shutdown() {
        let wasActive: Bool = lock.withLock {
            defer { active = false }
            return active
        }
        if wasActive { EventLoop.releaseShared() }
    }

    deinit { shutdown() }
}
