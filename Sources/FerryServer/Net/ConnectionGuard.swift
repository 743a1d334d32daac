import Logging
import NIOCore

/// The first handler of every connection (after TLS): it bounds what a client can hold open
/// without doing its part. It sees the raw bytes, so it works before Hummingbird's handlers
/// have parsed anything and the same way for HTTP and the sync WebSocket:
/// - the first request head must be complete within `headerTimeout` (idle TCP connections,
///   slowloris), else 408 and close; after it, Hummingbird's HTTP idle timeout applies;
/// - a socket that stays unwritable for `writeStallTimeout` (the client stopped reading) is
///   closed, as nothing can be sent to it any more, not even an error;
/// - once the first response is `101 Switching Protocols`, every client frame must be masked
///   (RFC 6455 section 5.1; close code 1002 otherwise), and a client that completes no frame
///   for `syncIdleTimeout` is closed (1001). The guard also sends the WebSocket pings (every
///   `syncPingInterval`) that give a quiet client something to answer. Time during which the
///   server itself is not reading the socket (its sync reader waits for the hub) does not
///   count as the client's silence: a busy server must not close healthy connections for pongs
///   it did not read (issue 13; hummingbird-websocket's own pings, which did, are off);
/// - a refused sync upgrade is answered with the status and body `SyncRoutes` chose
///   (`answerRefusedUpgrade`): Hummingbird answers every refusal 400 with no body;
/// - a close waits until what was written before it has reached the socket (at most
///   `writeStallTimeout`): NIO drops unwritten bytes when it closes, and the last bytes are
///   often what says why (an ERROR for a client that fell behind, a close frame).
final class ConnectionGuard: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private enum Phase {
        /// The first request head is arriving (the header timeout runs).
        case awaitingHead
        /// The head is complete; the first response tells HTTP from WebSocket. Bytes after the
        /// head are scanned as frames meanwhile: a client may send frames before the 101.
        case awaitingResponse
        /// Plain HTTP: Hummingbird's idle timeout takes over.
        case http
        case webSocket
        /// The guard answered or is closing: what the handlers behind it write is dropped.
        case answered
    }

    private let limits: ConnectionLimits
    private let logger: Logger
    private var phase = Phase.awaitingHead
    private var head = RequestHeadScanner()
    private var frames = WebSocketFrameScanner()
    private var sawUnmaskedFrame = false
    private var lastFrame = NIODeadline.now()
    /// True from the end of a read until the handlers behind ask for more: the server, not the
    /// client, is then why no frame arrives.
    private var readingPaused = false
    private var pingTimer: Scheduled<Void>?
    private var started = false
    private var headerTimer: Scheduled<Void>?
    private var idleTimer: Scheduled<Void>?
    private var stallTimer: Scheduled<Void>?
    /// Kept for `answerRefusedUpgrade`, which comes from outside the pipeline's events.
    private var context: ChannelHandlerContext?
    /// Writes passed on whose promise has not completed (not yet in the socket).
    private var unfinishedWrites = 0
    /// Closes asked for while writes were unfinished, done when they finish.
    private var deferredCloses: [EventLoopPromise<Void>?] = []
    private var lingerTimer: Scheduled<Void>?

    init(limits: ConnectionLimits, logger: Logger) {
        self.limits = limits
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimers()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelTimers()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        switch phase {
        case .awaitingHead:
            if let end = head.scan(buffer.readableBytesView) {
                phase = .awaitingResponse
                headerTimer?.cancel()
                headerTimer = nil
                if frames.scan(buffer.readableBytesView.dropFirst(end)).unmasked { sawUnmaskedFrame = true }
            }
        case .awaitingResponse:
            if frames.scan(buffer.readableBytesView).unmasked { sawUnmaskedFrame = true }
        case .webSocket:
            let summary = frames.scan(buffer.readableBytesView)
            if summary.unmasked {
                refuseUnmaskedFrame(context)
                return
            }
            if summary.completedFrames > 0 { lastFrame = .now() }
        case .http:
            break
        case .answered:
            return
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readingPaused = true
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        readingPaused = false
        context.read()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch phase {
        case .answered:
            promise?.succeed()
            return
        case .awaitingResponse:
            if case .byteBuffer(let bytes) = unwrapOutboundIn(data), bytes.readableBytesView.starts(with: Self.switchingProtocols) {
                pass(context, data, promise)
                upgraded(context)
                return
            }
            phase = .http
        case .awaitingHead, .http, .webSocket:
            break
        }
        pass(context, data, promise)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, unfinishedWrites > 0, context.channel.isActive else {
            return context.close(mode: mode, promise: promise)
        }
        deferredCloses.append(promise)
        guard lingerTimer == nil else { return }
        context.flush()
        lingerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.writeStallTimeout)) { [self] in
            lingerTimer = nil
            closeDeferred(context)
        }
    }

    /// Passes a write on, counting it until it is in the socket (or failed).
    private func pass(_ context: ChannelHandlerContext, _ data: NIOAny, _ promise: EventLoopPromise<Void>?) {
        let written = promise ?? context.eventLoop.makePromise(of: Void.self)
        unfinishedWrites += 1
        written.futureResult.assumeIsolated().whenComplete { [self] _ in
            unfinishedWrites -= 1
            if unfinishedWrites == 0 && !deferredCloses.isEmpty { closeDeferred(context) }
        }
        context.write(data, promise: written)
    }

    private func closeDeferred(_ context: ChannelHandlerContext) {
        lingerTimer?.cancel()
        lingerTimer = nil
        let promises = deferredCloses
        deferredCloses = []
        let closed = context.eventLoop.makePromise(of: Void.self)
        for p in promises { if let p { closed.futureResult.cascade(to: p) } }
        context.close(mode: .all, promise: closed)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stallTimer?.cancel()
            stallTimer = nil
        } else if stallTimer == nil {
            stallTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.writeStallTimeout)) { [self] in
                stallTimer = nil
                logger.warning("closing the connection from \(peer(context)): it has taken no bytes for \(limits.writeStallTimeout) (the client stopped reading)")
                phase = .answered
                context.close(promise: nil)
            }
        }
        context.fireChannelWritabilityChanged()
    }

    /// Answers a refused upgrade with `response` (written at once, on the loop); what
    /// Hummingbird then writes for the refusal is dropped, and it closes the connection.
    func answerRefusedUpgrade(_ response: ByteBuffer) {
        guard let context, phase == .awaitingResponse else { return }
        phase = .answered
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(response)), promise: nil)
    }

    private static let switchingProtocols = Array("HTTP/1.1 101".utf8)

    private func start(_ context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        headerTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.headerTimeout)) { [self] in
            headerTimer = nil
            guard phase == .awaitingHead else { return }
            logger.debug("closing the connection from \(peer(context)): no complete request head within \(limits.headerTimeout)")
            // Told as the end of the client's input, Hummingbird's upgrade handler gives up on
            // the request quietly (a plain close would be logged as an error per connection).
            answer(context, RawHTTPResponse.make(status: 408, reason: "Request Timeout",
                                                 body: "no complete request head within \(limits.headerTimeout)\n"),
                   endingInput: true)
        }
    }

    private func upgraded(_ context: ChannelHandlerContext) {
        phase = .webSocket
        if sawUnmaskedFrame {
            refuseUnmaskedFrame(context)
            return
        }
        lastFrame = .now()
        scheduleIdleCheck(context, at: lastFrame + TimeAmount(limits.syncIdleTimeout))
        schedulePing(context)
    }

    /// An empty, unmasked ping every `syncPingInterval`, written whole on the loop between the
    /// WebSocket layer's frames like `closeWebSocket`'s close frame.
    private func schedulePing(_ context: ChannelHandlerContext) {
        pingTimer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(limits.syncPingInterval)) { [self] in
            pingTimer = nil
            guard phase == .webSocket else { return }
            var ping = context.channel.allocator.buffer(capacity: 2)
            ping.writeInteger(UInt8(0x89))
            ping.writeInteger(UInt8(0))
            pass(context, wrapOutboundOut(.byteBuffer(ping)), nil)
            context.flush()
            schedulePing(context)
        }
    }

    private func scheduleIdleCheck(_ context: ChannelHandlerContext, at deadline: NIODeadline) {
        idleTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            idleTimer = nil
            guard phase == .webSocket else { return }
            if readingPaused { lastFrame = .now() }
            let due = lastFrame + TimeAmount(limits.syncIdleTimeout)
            if due > .now() { return scheduleIdleCheck(context, at: due) }
            logger.info("closing the sync connection from \(peer(context)): no frame from the client for \(limits.syncIdleTimeout)")
            closeWebSocket(context, code: 1001, reason: "no frame from the client for \(limits.syncIdleTimeout)")
        }
    }

    private func refuseUnmaskedFrame(_ context: ChannelHandlerContext) {
        logger.warning("closing the sync connection from \(peer(context)): it sent an unmasked frame")
        closeWebSocket(context, code: 1002, reason: "client frames must be masked (RFC 6455 section 5.1)")
    }

    /// A close frame written below the WebSocket layer, then the connection closed. Frames are
    /// written whole on the loop, so this never lands inside another one.
    private func closeWebSocket(_ context: ChannelHandlerContext, code: UInt16, reason: String) {
        let reasonBytes = Array(reason.utf8.prefix(123))
        var frame = context.channel.allocator.buffer(capacity: 4 + reasonBytes.count)
        frame.writeInteger(UInt8(0x88))
        frame.writeInteger(UInt8(2 + reasonBytes.count))
        frame.writeInteger(code)
        frame.writeBytes(reasonBytes)
        answer(context, frame)
    }

    /// Writes the guard's last word and closes; a socket that takes nothing is closed by the
    /// write-stall timer.
    private func answer(_ context: ChannelHandlerContext, _ bytes: ByteBuffer, endingInput: Bool = false) {
        phase = .answered
        cancelTimers(keepingStall: true)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(bytes))).assumeIsolated().whenComplete { _ in
            if endingInput { context.fireUserInboundEventTriggered(ChannelEvent.inputClosed) }
            context.close(promise: nil)
        }
    }

    private func cancelTimers(keepingStall: Bool = false) {
        headerTimer?.cancel()
        headerTimer = nil
        idleTimer?.cancel()
        idleTimer = nil
        pingTimer?.cancel()
        pingTimer = nil
        if !keepingStall {
            stallTimer?.cancel()
            stallTimer = nil
            lingerTimer?.cancel()
            lingerTimer = nil
        }
    }

    private func peer(_ context: ChannelHandlerContext) -> String {
        context.channel.remoteAddress?.description ?? "an unknown address"
    }
}
