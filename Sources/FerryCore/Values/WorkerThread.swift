#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ferry's one way to run a thread of its own (issue 25: one worker-thread helper): the store's
/// checkpoint thread, the watcher of other processes' commits, the client's event loop and the
/// server's password-hashing threads. A pthread that runs `body` and carries `name` (what
/// `top -H`, /proc and a debugger show; Linux keeps 15 bytes), then is joined (or detached) by
/// its owner. The body holds what it captures until it returns.
///
/// Not for work the cooperative pool or Dispatch already runs well: blocking SQLite reads on
/// the server use a Dispatch queue (`BlockingReads`), and the fan-out encodes with
/// `concurrentPerform`.
public final class WorkerThread: Sendable {
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) { (self.name, self.body) = (name, body) }
    }

    public let name: String
    private let thread: pthread_t
    /// Joined or detached (each at most once, and not both).
    private let ended = LockedValue(false)

    /// Starts the thread. Throws `FerryError(.io)` with the system's reason when it cannot
    /// (out of threads or memory): nothing then runs.
    public init(name: String, _ body: @escaping @Sendable () -> Void) throws {
        self.name = name
        let start = Unmanaged.passRetained(Start(name, body)).toOpaque()
        var created = pthread_t()
        let rc = pthread_create(&created, nil, { arg in
            guard let arg else { return nil }
            let start = Unmanaged<Start>.fromOpaque(arg).takeRetainedValue()
            WorkerThread.nameCurrentThread(start.name)
            start.body()
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw FerryError(.io, "cannot start the \(name) thread: \(String(cString: strerror(rc)))")
        }
        thread = created
    }

    /// Waits until the body returned (the first call; later ones return at once). Never call
    /// it from the thread itself: `detach` there.
    public func join() {
        guard ended.withLock({ (e: inout Bool) -> Bool in
            defer { e = true }
            return !e
        }) else { return }
        pthread_join(thread, nil)
    }

    /// Lets the thread end on its own (for a thread that stops itself, or one nobody waits
    /// for); `join` then returns at once.
    public func detach() {
        guard ended.withLock({ (e: inout Bool) -> Bool in
            defer { e = true }
            return !e
        }) else { return }
        pthread_detach(thread)
    }

    /// Whether the calling thread is this one.
    public var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }

    /// Names the calling thread: on Linux through /proc (glibc's `pthread_setname_np` needs
    /// `_GNU_SOURCE`, which Swift's Glibc module does not define); a name that cannot be set
    /// (no /proc) is only cosmetic.
    public static func nameCurrentThread(_ name: String) {
        #if os(Linux)
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        #endif
    }

    /// The calling thread's name as the system keeps it ("" where unknown).
    public static func currentThreadName() -> String {
        #if os(Linux)
        let fd = open("/proc/thread-self/comm", O_RDONLY)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return "" }
        return String(decoding: buffer[..<n].prefix { $0 != 10 && $0 != 0 }, as: UTF8.self)
        #else
        return ""
        #endif
    }
}
