import ArgumentParser
import FerryServer

/// The flags of `ConnectionLimits` (docs/server-config.md, "Limits and timeouts"); a flag not
/// given keeps the library's default.
struct ConnectionLimitOptions: ParsableArguments {
    @Option(name: .customLong("max-connections"), help: "Open connections at most; more are answered 503 (default: the open-files limit less 64).")
    var maxConnections: Int?

    @Option(name: .customLong("header-timeout"), help: "Seconds a new connection has to send a complete request head (default 10).")
    var headerTimeout: Double?

    @Option(name: .customLong("http-idle-timeout"), help: "Seconds an HTTP connection may stay idle between requests (default 60).")
    var httpIdleTimeout: Double?

    @Option(name: .customLong("sync-idle-timeout"), help: "Seconds a sync WebSocket may go without a frame from the client (default 180).")
    var syncIdleTimeout: Double?

    @Option(name: .customLong("write-stall-timeout"), help: "Seconds a connection may take no bytes before it is closed (default 30).")
    var writeStallTimeout: Double?

    @Option(name: .customLong("max-queued-bytes"), help: "Bytes waiting to be sent on one sync connection at most (default 16 MiB).")
    var maxQueuedBytes: Int?

    @Option(name: .customLong("max-queued-bytes-total"), help: "Bytes waiting to be sent on every sync connection together at most; past it the connection furthest behind is dropped (default 512 MiB).")
    var maxQueuedBytesTotal: Int?

    @Option(name: .customLong("max-message-bytes"), help: "The largest sync message a client may send (default 64 MiB).")
    var maxMessageBytes: Int?

    @Option(name: .customLong("max-inbound-bytes"), help: "Bytes of client sync messages held at once, all connections together (default 256 MiB).")
    var maxInboundBytes: Int?

    func validate() throws {
        for (flag, value) in [("--max-connections", maxConnections), ("--max-queued-bytes", maxQueuedBytes), ("--max-queued-bytes-total", maxQueuedBytesTotal),
                              ("--max-message-bytes", maxMessageBytes), ("--max-inbound-bytes", maxInboundBytes)] {
            if let value, value < 1 { throw ValidationError("\(flag) must be at least 1") }
        }
        for (flag, value) in [("--header-timeout", headerTimeout), ("--http-idle-timeout", httpIdleTimeout),
                              ("--sync-idle-timeout", syncIdleTimeout), ("--write-stall-timeout", writeStallTimeout)] {
            if let value, !(value > 0) { throw ValidationError("\(flag) must be a positive number of seconds") }
        }
    }

    var limits: ConnectionLimits {
        var limits = ConnectionLimits()
        if let maxConnections { limits.maxConnections = maxConnections }
        if let headerTimeout { limits.headerTimeout = .seconds(headerTimeout) }
        if let httpIdleTimeout { limits.httpIdleTimeout = .seconds(httpIdleTimeout) }
        if let syncIdleTimeout { limits.syncIdleTimeout = .seconds(syncIdleTimeout) }
        if let writeStallTimeout { limits.writeStallTimeout = .seconds(writeStallTimeout) }
        if let maxQueuedBytes { limits.maxQueuedBytesPerConnection = maxQueuedBytes }
        if let maxQueuedBytesTotal { limits.maxQueuedBytesTotal = maxQueuedBytesTotal }
        if let maxMessageBytes { limits.maxMessageBytes = maxMessageBytes }
        if let maxInboundBytes { limits.maxInboundBytes = maxInboundBytes }
        return limits
    }
}
