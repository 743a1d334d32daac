import Logging
import NIOCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The listening socket's answer to `accept` failing for want of file descriptors (EMFILE,
/// ENFILE, or the kernel short of buffers or memory): give the process the descriptors of its
/// `DescriptorReserve`, stop accepting, and every `pause` try to take the reserve back (with
/// one to spare): only then accept again. Meanwhile new connections wait in the kernel's
/// backlog, and the rest of the server has a few descriptors to work with. One warning line
/// says so when a shortage starts (at most one a minute), one line when accepting works again.
///
/// SwiftNIO 2.101 retries such an accept at once, forever: the failed accept leaves its read
/// pending, so the socket stays registered for readability, and its own `AcceptBackoffHandler`
/// never sees a `read` to delay. An idle server at its descriptor limit spun a core (92,778
/// failed `accept4` calls in 5 s) and its admin API stopped answering (issue 13). This handler
/// sits first on the listening socket's pipeline, so it sees the error before anything else,
/// and pauses reading by turning auto-read off, which takes the socket out of the selector;
/// turning it on again after `pause` reads again. `ConnectionLimits.acceptCeiling` keeps the
/// server's own connections below the limit; this covers what it cannot count (descriptors
/// taken by data files, the database, threads of other libraries, a lowered limit).
final class DescriptorShortageBackoff: ChannelDuplexHandler {
    typealias InboundIn = Channel
    typealias OutboundIn = Never

    private let pause: TimeAmount
    private let logger: Logger
    private let reserve: DescriptorReserve
    private var paused = false
    private var resumeTimer: Scheduled<Void>?
    /// When the current shortage began (nil while accepting works) and the accepts it failed.
    private var shortageStart: NIODeadline?
    private var failedAccepts = 0
    private var lastWarning: NIODeadline?

    init(pause: TimeAmount = .milliseconds(200), reserve: Int = 16, logger: Logger) {
        self.pause = pause
        self.logger = logger
        self.reserve = DescriptorReserve(size: reserve)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let e = error as? IOError, Self.isShortage(e.errnoCode) else {
            context.fireErrorCaught(error)
            return
        }
        failedAccepts += 1
        if shortageStart == nil {
            shortageStart = .now()
            if lastWarning.map({ NIODeadline.now() - $0 >= .seconds(60) }) ?? true {
                lastWarning = .now()
                logger.warning("cannot accept connections: \(Self.explanation(e.errnoCode)); not accepting for \(Self.text(pause)) at a time until descriptors are free (new connections wait in the backlog)")
            }
        }
        pauseAccepting(context)
        // Not passed on: the server's accept loop would end on it.
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let start = shortageStart {
            logger.notice("accepting connections again after \(Self.text(NIODeadline.now() - start)) without file descriptors (\(failedAccepts) accepts failed)")
            shortageStart = nil
            failedAccepts = 0
        }
        context.fireChannelRead(data)
    }

    /// While paused, a read asked for behind (Hummingbird's connection limit, as a connection
    /// closes) waits for the pause to end: accepting now would fail again.
    func read(context: ChannelHandlerContext) {
        guard !paused else { return }
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        resumeTimer?.cancel()
        resumeTimer = nil
        reserve.release()
        context.fireChannelInactive()
    }

    private func pauseAccepting(_ context: ChannelHandlerContext) {
        reserve.release()
        guard !paused else { return }
        paused = true
        // Without it, the loop accepts (and fails) again at once: said, not hidden (issue 22, point 10).
        do { try context.channel.syncOptions?.setOption(.autoRead, value: false) } catch {
            logger.error("cannot pause accepting during a descriptor shortage (\(error)): accepts fail at full speed until descriptors are free")
        }
        scheduleResume(context)
    }

    private func scheduleResume(_ context: ChannelHandlerContext) {
        resumeTimer = context.eventLoop.assumeIsolated().scheduleTask(in: pause) { [self] in
            resumeTimer = nil
            guard reserve.restore(sparing: 1) else { return scheduleResume(context) }
            paused = false
            // Reads (accepts) again: the socket is back in the selector.
            do { try context.channel.syncOptions?.setOption(.autoRead, value: true) } catch {
                logger.critical("cannot resume accepting connections after a descriptor shortage: \(error)")
            }
        }
    }

    static func isShortage(_ errno: Int32) -> Bool {
        errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM
    }

    private static func explanation(_ errno: Int32) -> String {
        switch errno {
        case EMFILE:
            let limit = ConnectionLimits.openFilesLimit.map { " (the open-files limit, ulimit -n, is \($0))" } ?? ""
            return "the process has no file descriptors left\(limit); raise the limit or lower --max-connections"
        case ENFILE: return "the system's open-file table is full"
        default: return "the system is short of socket buffers or memory (errno \(errno))"
        }
    }

    private static func text(_ t: TimeAmount) -> String {
        let ms = t.nanoseconds / 1_000_000
        return ms < 1000 ? "\(ms) ms" : "\(Double(ms / 100) / 10) s"
    }
}
