import FerryCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What one connection may hold open or make the server hold (docs/server-config.md, "Limits
/// and timeouts"). Every bound keeps a client that stops reading, stops writing or never
/// finishes a message from using up the server's memory or file descriptors. The defaults never
/// cut a healthy client: a device PINGs after a minute without traffic and answers the server's
/// WebSocket pings (every 30 s), so it is never silent for long.
public struct ConnectionLimits: Sendable, Equatable {
    /// Open connections served at most (HTTP and sync together); a connection beyond it is
    /// answered 503 with a short text and closed at once. The default is three quarters of the
    /// process's open-files limit less 64, which leaves descriptors for the data files and for
    /// the refusals themselves (see `acceptCeiling`).
    public var maxConnections: Int
    /// A new connection must send a complete request head within this (slowloris, idle TCP);
    /// past it the server answers 408 and closes.
    public var headerTimeout: Duration
    /// An HTTP connection with no request in progress is closed after this.
    public var httpIdleTimeout: Duration
    /// A sync WebSocket on which the client sends no frame for this long is closed (close code
    /// 1001). Pongs and the client's PINGs count.
    public var syncIdleTimeout: Duration
    /// The server sends a WebSocket ping on every sync connection this often, so that a client
    /// with nothing to say still answers within `syncIdleTimeout`.
    public var syncPingInterval: Duration
    /// A connection whose socket takes no bytes for this long (the client stopped reading) is
    /// closed: nothing can be sent to it any more.
    public var writeStallTimeout: Duration
    /// Bytes of sync messages waiting to be sent on one connection at most; past it the client
    /// has fallen behind: it gets ERROR 242 and is disconnected, and resumes from its last
    /// server version when it reconnects.
    public var maxQueuedBytesPerConnection: Int
    /// Bytes of sync messages waiting to be sent on every connection together at most; past
    /// it the connection furthest behind gets ERROR 242 and is disconnected (`OutboxBudget`).
    /// Sessions are fed from memory only within `SyncLimits.fanOutWindowBytes`, so an honest
    /// server rarely comes near it; what it bounds is many connections that do not read.
    public var maxQueuedBytesTotal: Int = 512 << 20
    /// The largest sync message a client may send (ERROR 201 and disconnection past it).
    public var maxMessageBytes: Int
    /// Bytes of client sync messages the server holds at once across all connections, whether
    /// still arriving or waiting to be processed; a connection that would go past it gets
    /// ERROR 241 (try again later) and is disconnected.
    public var maxInboundBytes: Int

    public init(maxConnections: Int = ConnectionLimits.defaultMaxConnections,
                headerTimeout: Duration = .seconds(10), httpIdleTimeout: Duration = .seconds(60),
                syncIdleTimeout: Duration = .seconds(180), writeStallTimeout: Duration = .seconds(30),
                maxQueuedBytesPerConnection: Int = 16 << 20, maxMessageBytes: Int = ProtocolCodec.maxFrameBytes,
                maxInboundBytes: Int = 256 << 20, syncPingInterval: Duration = .seconds(30)) {
        self.maxConnections = maxConnections
        self.headerTimeout = headerTimeout
        self.httpIdleTimeout = httpIdleTimeout
        self.syncIdleTimeout = syncIdleTimeout
        self.writeStallTimeout = writeStallTimeout
        self.maxQueuedBytesPerConnection = maxQueuedBytesPerConnection
        self.maxMessageBytes = maxMessageBytes
        self.maxInboundBytes = maxInboundBytes
        self.syncPingInterval = syncPingInterval
    }

    /// Three quarters of the open-files limit less 64, at least 16 (10,000 without a limit).
    public static var defaultMaxConnections: Int {
        guard let files = openFilesLimit else { return 10_000 }
        return max(16, (files - 64) * 3 / 4)
    }

    /// Connections accepted at once at most, refused ones (still being answered 503) included:
    /// past it the server stops accepting, and new connections wait in the kernel's backlog.
    /// It stays 32 below the open-files limit, because when `accept` fails for want of
    /// descriptors SwiftNIO 2.101 retries at once, forever (the listening socket stays readable
    /// and its accept back-off never runs), which spins a core; not accepting avoids that.
    var acceptCeiling: Int {
        let wanted = maxConnections + max(16, maxConnections / 4)
        guard let files = Self.openFilesLimit else { return wanted }
        return max(1, min(wanted, files - 32))
    }

    /// The process's soft limit of open files; nil when unlimited or unknown.
    static var openFilesLimit: Int? {
        var limit = rlimit()
        #if canImport(Glibc)
        let known = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
        #else
        let known = getrlimit(RLIMIT_NOFILE, &limit) == 0
        #endif
        guard known, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }
}
