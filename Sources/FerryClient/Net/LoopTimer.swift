import CLibUV

/// A one-shot libuv timer on the loop thread, for connect and response timeouts. The handle is
/// closed by `invalidate()` (or deinit) and freed in its close callback, as libuv requires.
final class LoopTimer {
    private var handle: UnsafeMutablePointer<uv_timer_t>?
    private var action: (() -> Void)?

    init(loop: EventLoop) {
        let handle = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_timer_init(loop.uvLoop, handle)
        self.handle = handle
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Runs `action` once after `milliseconds`, replacing any earlier schedule.
    func schedule(afterMilliseconds milliseconds: UInt64, _ action: @escaping () -> Void) {
        guard let handle else { return }
        self.action = action
        uv_timer_start(handle, { timer in
            guard let data = timer?.pointee.data else { return }
            let owner = Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue()
            let action = owner.action
            owner.action = nil
            action?()
        }, milliseconds, 0)
    }

    func cancel() {
        action = nil
        if let handle { uv_timer_stop(handle) }
    }

    /// Closes the handle; the timer never fires after this.
    func invalidate() {
        action = nil
        guard let handle else { return }
        self.handle = nil
        handle.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            closed.map { UnsafeMutableRawPointer($0).assumingMemoryBound(to: uv_timer_t.self).deallocate() }
        }
    }

    deinit { invalidate() }
}
