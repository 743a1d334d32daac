/// One sync connection open on a node, as published for the cluster's device list.
public struct LiveConnectionRecord: Sendable, Equatable {
    public var node: String
    public var connectionId: UInt64
    public var userId: String
    /// The client file of the connection's last bound session (nil before a bind).
    public var clientFile: UInt64?
    /// The SDK/host version string the client sent (`X-Ferry-SDK`), nil when it sent none.
    public var sdk: String?
    public var connectedSinceMilliseconds: Int64
    public var bytesUp: Int64
    public var bytesDown: Int64
    public var sessions: Int

    public init(node: String, connectionId: UInt64, userId: String, clientFile: UInt64? = nil, sdk: String? = nil,
                connectedSinceMilliseconds: Int64, bytesUp: Int64 = 0, bytesDown: Int64 = 0, sessions: Int = 0) {
        self.node = node
        self.connectionId = connectionId
        self.userId = userId
        self.clientFile = clientFile
        self.sdk = sdk
        self.connectedSinceMilliseconds = connectedSinceMilliseconds
        self.bytesUp = bytesUp
        self.bytesDown = bytesDown
        self.sessions = sessions
    }
}
