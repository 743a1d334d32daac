import FerryCore

/// What a token undoes: its registration (once, from any thread), then optionally something on
/// the loop thread once any delivery in progress is over. Shared by the token types, which stay
/// distinct so a host cannot hand one registry's token to another (SPEC F-PROGRESS).
final class Registration: @unchecked Sendable {
    private let lock = ThreadLock()
    private var unregister: (() -> Void)?
    private let post: (@escaping @Sendable () -> Void) -> Bool

    /// `post` runs a closure on the loop thread (false: the loop has stopped).
    init(post: @escaping (@escaping @Sendable () -> Void) -> Bool, _ unregister: @escaping () -> Void) {
        self.post = post
        self.unregister = unregister
    }

    func cancel() {
        let u = lock.withLock { () -> (() -> Void)? in
            defer { unregister = nil }
            return unregister
        }
        u?()
    }

    func cancel(then: @escaping @Sendable () -> Void) {
        cancel()
        if !post(then) { then() }
    }
}
