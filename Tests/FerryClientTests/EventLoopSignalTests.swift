import FerryClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A C host that keeps SIGPIPE's default action must not be killed when a server closes a
/// socket Ferry is writing: the loop thread blocks SIGPIPE, so the write fails with EPIPE.
@Suite("Event loop: signals")
struct EventLoopSignalTests {
    @Test func theLoopThreadBlocksBrokenPipeSignals() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let outcome = await loop.run { _ -> (blocked: Bool, written: Int, error: Int32) in
            var current = sigset_t()
            pthread_sigmask(SIG_BLOCK, nil, &current)
            let blocked = sigismember(&current, SIGPIPE) == 1
            // A write into a pipe whose reader is gone raises SIGPIPE in this thread: were it
            // not blocked here, a process with the default action would end now.
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { return (blocked, -2, errno) }
            close(fds[0])
            var byte: UInt8 = 1
            let written = write(fds[1], &byte, 1)
            let error = errno
            close(fds[1])
            return (blocked, written, error)
        }
        let result = try #require(outcome)
        #expect(result.blocked)
        #expect(result.written == -1)
        #expect(result.error == EPIPE)
    }
}
