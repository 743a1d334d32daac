/// Where and when notification callbacks run. The store only says "this observer has
/// something to deliver"; a scheduler decides the thread: Ferry's event loop (FerryClient's
/// `LoopScheduler`) or the host's own thread (`PollingScheduler`).
public protocol NotificationScheduler: AnyObject, Sendable {
    /// Arranges for `work` to run soon, on the scheduler's thread. Called from any thread.
    /// `work` returns whether it ran a host callback.
    func schedule(_ work: @escaping @Sendable () -> Bool)
    /// Called when the database handle using the scheduler is freed.
    func shutdown()
}
