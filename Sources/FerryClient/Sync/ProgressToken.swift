import FerryCore

/// The registration of a progress notifier. `cancel()`, or releasing the token, unregisters it:
/// no callback starts after `cancel()` returns (one already running on the loop thread finishes).
public final class ProgressToken: @unchecked Sendable {
    private let lock = SpinLock()
    private var unregister: (() -> Void)?
    private let post: (@escaping @Sendable () -> Void) -> Bool

    /// `post` runs a closure on the loop thread (false: the loop has stopped).
    init(post: @escaping (@escaping @Sendable () -> Void) -> Bool, _ unregister: @escaping () -> Void) {
        self.post = post
        self.unregister = unregister
    }

    public func cancel() {
        let u = lock.withLock { () -> (() -> Void)? in
            defer { unregister = nil }
            return unregister
        }
        u?()
    }

    /// Unregisters, then runs `then` on the loop thread once any delivery in progress is over
    /// (at once when the loop has stopped): where a C host's userdata is freed.
    public func cancel(then: @escaping @Sendable () -> Void) {
        cancel()
        if !post(then) { then() }
    }

    deinit { cancel() }
}
