import FerryStore

extension App {
    /// What an App is told at its start: its server and app, where it keeps its users, and the
    /// connection's timings. The zero value of each option is the safe one
    /// (`allowInsecureHTTP` false).
    public struct Configuration: Sendable {
        public var appId: String
        /// `http://host:port` or `https://host:port` of the Ferry server.
        public var baseURL: String
        /// Where the App keeps its user cache (and, by default, the users' databases).
        public var baseDirectory: String
        public var tls: TLSOptions
        public var requestTimeoutMs: UInt64
        public var logLevel: LogLevel
        /// All sessions of a user share one connection (SPEC F-MUX); false: one per session.
        public var multiplexSessions: Bool
        /// A connection that receives nothing for this long is dropped and retried (F-READTIMEOUT).
        public var readTimeoutMs: UInt64
        /// A connection quiet for this long sends a ping (the server's pong keeps it alive).
        public var pingIntervalMs: UInt64
        /// Reconnection backoff: the first retry waits about the minimum, each failure doubles
        /// it up to the maximum; a successful connection starts over (F-BACKOFF).
        public var reconnectDelayMinMs: UInt64
        public var reconnectDelayMaxMs: UInt64
        /// Encrypts the user cache in the base directory (ids and tokens of the users that
        /// logged in on this device) like a database file (docs/encryption.md); an
        /// unencrypted cache is encrypted at once.
        public var encryptionKey: EncryptionKey?
        /// Allows a plain `http://` base URL to a host other than loopback (`localhost`,
        /// 127.0.0.0/8, `::1`): tokens, passwords and data then cross the network unencrypted.
        /// False (the default) refuses such a URL; https is never affected.
        public var allowInsecureHTTP: Bool = false
        public init(appId: String, baseURL: String, baseDirectory: String, tls: TLSOptions = TLSOptions(),
                    requestTimeoutMs: UInt64 = 60_000, logLevel: LogLevel = .info, multiplexSessions: Bool = true,
                    readTimeoutMs: UInt64 = 120_000, pingIntervalMs: UInt64 = 60_000,
                    reconnectDelayMinMs: UInt64 = 1_000, reconnectDelayMaxMs: UInt64 = 16_000) {
            self.appId = appId
            self.baseURL = baseURL
            self.baseDirectory = baseDirectory
            self.tls = tls
            self.requestTimeoutMs = requestTimeoutMs
            self.logLevel = logLevel
            self.multiplexSessions = multiplexSessions
            self.readTimeoutMs = readTimeoutMs
            self.pingIntervalMs = pingIntervalMs
            self.reconnectDelayMinMs = reconnectDelayMinMs
            self.reconnectDelayMaxMs = reconnectDelayMaxMs
        }
    }
}

extension String {
    /// The text without any run of `suffix` at its end (a base URL's trailing slashes).
    func trimmingSuffix(_ suffix: String) -> String {
        var s = self
        while s.hasSuffix(suffix) { s.removeLast(suffix.count) }
        return s
    }
}
