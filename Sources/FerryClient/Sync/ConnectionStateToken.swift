/// The registration of a connection state observer. `cancel()`, or releasing the token, unregisters it.
/// Callbacks run on the loop thread: one that was already being delivered when `cancel()` was
/// called from another thread may still run; none starts later.
public final class ConnectionStateToken: @unchecked Sendable {
    private let registration: Registration

    init(post: @escaping (@escaping @Sendable () -> Void) -> Bool, _ unregister: @escaping () -> Void) {
        registration = Registration(post: post, unregister)
    }

    public func cancel() { registration.cancel() }

    /// Unregisters, then runs `then` on the loop thread once any delivery in progress is over
    /// (at once when the loop has stopped): where a C host's userdata is freed.
    public func cancel(then: @escaping @Sendable () -> Void) { registration.cancel(then: then) }

    deinit { registration.cancel() }
}
