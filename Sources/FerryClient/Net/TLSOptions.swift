/// How https and wss connections check the server. By default the system's CA store and the
/// host name are checked; `caFile` adds a PEM bundle (a private CA, a test certificate).
/// The zero value (`TLSOptions()`) is the safe one: skipping verification must be asked for.
public struct TLSOptions: Sendable {
    /// A PEM file of extra trusted certificates, in addition to the default CA paths.
    public var caFile: String?
    /// True skips certificate and host name verification: anyone on the path can read and
    /// change the traffic. For tests only.
    public var insecureSkipVerify: Bool

    public init(caFile: String? = nil, insecureSkipVerify: Bool = false) {
        self.caFile = caFile
        self.insecureSkipVerify = insecureSkipVerify
    }
}
