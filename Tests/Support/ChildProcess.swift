#if canImport(Glibc)
import Glibc
#endif

/// A program the tests start (a `ferry-server`, the fault proxy, `prlimit`), with
/// posix_spawn rather than Foundation's `Process`: `Process.run` reads past a buffer when the
/// test process holds more than about 1,300 descriptors (the client suite opens 250 synced
/// databases at once beside the other tests), and that crash ended whole test runs (issue 23's
/// session saw it in `FaultProxy`, an earlier one in `DescriptorLimitTests`). Shared by the
/// test targets instead of copied.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var exitStatus: Int32?

    public struct SpawnError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `executable` (a path) with `arguments`; its standard output and error go to the
    /// files named (appended, created 0600), `/dev/null` by default. `environment` nil: this
    /// process's.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                standardOutput: String = "/dev/null", standardError: String = "/dev/null") throws {
        pthread_mutex_init(lock, nil)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, standardOutput, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, standardError, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        // Nothing else of the test process goes to the child (as `Process` does it): a
        // listening socket it inherited would keep a test from starting a server again on
        // that port. glibc 2.34's posix_spawn_file_actions_addclosefrom_np, found at run time
        // (Swift's Glibc module does not declare it).
        guard let closeFrom = Self.addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw SpawnError(description: "this C library cannot close descriptors in a spawned child (glibc 2.34 or later is needed)")
        }
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { if let envp { for e in envp { free(e) } } }
        // As `Process` does: the child starts with no signal blocked and every signal at its
        // default action, whatever the test process blocks or ignores (a SIGTERM blocked in
        // the test runner would otherwise be blocked in the server it stops with SIGTERM).
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let spawned: Int32
        if envp != nil {
            spawned = posix_spawn(&child, executable, &actions, &attributes, &argv, &envp!)
        } else {
            spawned = posix_spawn(&child, executable, &actions, &attributes, &argv, environ)
        }
        guard spawned == 0 else { throw SpawnError(description: "cannot start \(executable): \(String(cString: strerror(spawned)))") }
        pid = child
    }

    deinit {
        if isRunning {
            Glibc.kill(pid, SIGKILL)
            _ = waitUntilExit()
        }
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// Whether the program has not exited yet (reaps it when it has).
    public var isRunning: Bool {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid { exitStatus = status; return false }
        return r == 0
    }

    public func signal(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// Waits for the program to exit; its wait status.
    @discardableResult
    public func waitUntilExit() -> Int32 {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        if let exitStatus { return exitStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        exitStatus = status
        return status
    }

    /// Whether the program exited by itself with status 0 (waits for it).
    public var exitedCleanly: Bool {
        let status = waitUntilExit()
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }

    /// Runs a program to its end; its wait status.
    public static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        try ChildProcess(executable, arguments).waitUntilExit()
    }
}
