/// How https and wss connections check the server. By default the system's CA store and the
/// host name are checked; `caFile` adds a PEM bundle (a private CA, a test certificate).
public struct TLSOptions: Sendable {
    /// A PEM file of extra trusted certificates, in addition to the default CA paths.
    public var caFile: String?
    /// False skips certificate and host name verification: for tests only.
    public var verifyPeer: Bool

    public init(caFile: String? = nil, verifyPeer: Bool = true) {
        self.caFile = caFile
        self.verifyPeer = verifyPeer
    }
}
