import CLibUV
import FerryCore
import FerryStore
#if canImport(Glibc)
import Glibc
#endif

/// A libuv loop on its own thread. Other threads hand it work with `post`, the one door in
/// (`uv_async_send`); everything posted runs on the loop thread in order. The shared loop is
/// reference-counted: started by the first user, stopped and joined when the last one leaves,
/// so a host that closes everything ends with no Ferry thread and nothing leaked.
public final class EventLoop: @unchecked Sendable {
    private let loop: UnsafeMutablePointer<uv_loop_t>
    /// The libuv loop, for handles (sockets, timers) that live on this loop; touch it only
    /// from the loop thread.
    public var uvLoop: UnsafeMutablePointer<uv_loop_t> { loop }
    private let async: UnsafeMutablePointer<uv_async_t>
    private var thread: WorkerThread?
    private let lock = ThreadLock()
    private var queue: [@Sendable () -> Void] = []
    private var stopping = false
    private var threadID: pthread_t?

    private static let sharedLock = ThreadLock()
    nonisolated(unsafe) private static var shared: EventLoop?
    nonisolated(unsafe) private static var sharedUsers = 0

    /// The process's shared loop, started if needed; pair with `releaseShared()`.
    public static func acquireShared() throws -> EventLoop {
        try sharedLock.withLock {
            if let s = shared {
                sharedUsers += 1
                return s
            }
            let s = try EventLoop()
            shared = s
            sharedUsers = 1
            return s
        }
    }

    public static func releaseShared() {
        let toStop: EventLoop? = sharedLock.withLock {
            guard sharedUsers > 0 else { return nil }
            sharedUsers -= 1
            guard sharedUsers == 0, let s = shared else { return nil }
            shared = nil
            return s
        }
        toStop?.stop()
    }

    private init() throws {
        loop = .allocate(capacity: 1)
        async = .allocate(capacity: 1)
        guard uv_loop_init(loop) == 0 else {
            loop.deallocate(); async.deallocate()
            throw FerryError(.io, "cannot start the event loop (uv_loop_init failed)")
        }
        uv_async_init(loop, async) { handle in
            guard let data = handle?.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drain()
        }
        async.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        do { thread = try WorkerThread(name: "ferry-loop") { [self] in run() } } catch {
            uv_close(UnsafeMutableRawPointer(async).assumingMemoryBound(to: uv_handle_t.self), nil)
            uv_run(loop, UV_RUN_DEFAULT)
            uv_loop_close(loop)
            loop.deallocate(); async.deallocate()
            throw FerryError(.io, "cannot start the event loop thread")
        }
    }

    private func run() {
        Self.blockBrokenPipeSignal()
        lock.withLock { threadID = pthread_self() }
        uv_run(loop, UV_RUN_DEFAULT)
    }

    /// libuv writes sockets with write(2), which raises SIGPIPE in the writing thread when the
    /// peer has already reset the connection; SIGPIPE's default action ends the whole process,
    /// so a server closing a socket at the wrong moment would kill the host program. Blocked in
    /// this thread only (the host's own disposition is left alone), the signal stays pending on
    /// it and the write fails with EPIPE, which the connection handles like any other error.
    private static func blockBrokenPipeSignal() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Whether the caller is on the loop thread.
    public var isCurrent: Bool { lock.withLock { threadID.map { pthread_equal($0, pthread_self()) != 0 } ?? false } }

    /// Runs `work` on the loop thread, after everything posted before it. False (and `work`
    /// dropped) when the loop is stopping.
    @discardableResult
    public func post(_ work: @escaping @Sendable () -> Void) -> Bool {
        let accepted: Bool = lock.withLock {
            guard !stopping else { return false }
            queue.append(work)
            return true
        }
        if accepted { uv_async_send(async) }
        return accepted
    }

    private func drain() {
        while true {
            let (work, stop) = lock.withLock { () -> ([@Sendable () -> Void], Bool) in
                let w = queue
                queue.removeAll()
                return (w, stopping)
            }
            if work.isEmpty {
                if stop { uv_close(UnsafeMutableRawPointer(async).assumingMemoryBound(to: uv_handle_t.self), nil) }
                return
            }
            for w in work { w() }
        }
    }

    /// Stops the loop after the work already posted and joins its thread (or, when called on the
    /// loop thread itself, lets it end on its own).
    private func stop() {
        lock.withLock { stopping = true }
        uv_async_send(async)
        if isCurrent {
            thread?.detach()
            // The loop ends when this callback returns; `run` then drops the last reference.
            return
        }
        thread?.join()
        uv_loop_close(loop)
        loop.deallocate()
        async.deallocate()
        released = true
    }

    private var released = false

    deinit {
        if !released {
            uv_loop_close(loop)
            loop.deallocate()
            async.deallocate()
        }
    }
}
