import NIOCore

/// The whole pipeline of a connection beyond `ConnectionLimits.maxConnections`: answers 503
/// with a text that says why, then closes. What the client sends meanwhile is read and
/// dropped, so the close is a clean FIN rather than a reset that could lose the answer; a
/// client that sends nothing more is closed after `linger`.
final class ConnectionRefusal: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let response: ByteBuffer
    private let linger: TimeAmount
    private var answered = false

    init(limit: Int, linger: TimeAmount = .milliseconds(250)) {
        response = RawHTTPResponse.make(status: 503, reason: "Service Unavailable",
                                        body: "the server has too many open connections (at most \(limit)); try again later\n",
                                        headers: [("Retry-After", "5")])
        self.linger = linger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { answer(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        answer(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case ChannelEvent.inputClosed = event { context.close(promise: nil) }
    }

    private func answer(_ context: ChannelHandlerContext) {
        guard !answered else { return }
        answered = true
        let linger = self.linger
        context.writeAndFlush(wrapOutboundOut(response)).assumeIsolated().whenComplete { _ in
            _ = context.eventLoop.assumeIsolated().scheduleTask(in: linger) { context.close(promise: nil) }
        }
    }
}
