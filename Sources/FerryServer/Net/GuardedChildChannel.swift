import HummingbirdCore
import HummingbirdWebSocket
import Logging
import NIOCore

/// The server's child channel (HTTP/1.1 with the sync WebSocket upgrade) behind the connection
/// limits: a connection beyond `maxConnections` gets only a `ConnectionRefusal`; every other one
/// gets a `ConnectionGuard` in front of Hummingbird's handlers and is counted until it closes.
struct GuardedChildChannel<Inner: ServerChildChannel>: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        /// Nil for a refused connection: nothing to serve.
        let inner: Inner.Value?
        let channel: any Channel
    }

    let inner: Inner
    let limits: ConnectionLimits
    let counter: ConnectionCounter
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        guard counter.tryOpen() else {
            if counter.shouldLogRefusal() {
                self.logger.warning("refusing connections (503): \(counter.limit) are open, the most allowed (--max-connections)")
            }
            let limit = counter.limit
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(ConnectionRefusal(limit: limit))
                return Value(inner: nil, channel: channel)
            }
        }
        let counter = self.counter
        channel.closeFuture.whenComplete { _ in counter.close() }
        let (limits, guardLogger, inner) = (self.limits, self.logger, self.inner)
        return channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard(limits: limits, logger: guardLogger))
        }.flatMap {
            inner.setup(channel: channel, logger: logger)
        }.map { Value(inner: $0, channel: channel) }
    }

    func handle(value: Value, logger: Logger) async {
        guard let served = value.inner else { return }
        await inner.handle(value: served, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 and the sync WebSocket upgrade (decided by `sync`), behind `limits`.
    static func ferry(sync: SyncRoutes, limits: ConnectionLimits, logger: Logger) -> HTTPServerBuilder {
        let counter = ConnectionCounter(limit: limits.maxConnections)
        return .init { responder in
            GuardedChildChannel(
                inner: HTTP1WebSocketUpgradeChannel(
                    responder: responder,
                    // No pings of hummingbird-websocket: it closes a connection whose pong it has
                    // not read, also while the server does not read (the guard pings instead).
                    configuration: .init(http1: .init(idleTimeout: TimeAmount(limits.httpIdleTimeout)), ws: .init(autoPing: .disabled)),
                    shouldUpgrade: { request, channel, _ in await sync.shouldUpgrade(request, channel: channel) }),
                limits: limits, counter: counter, logger: logger)
        }
    }
}
