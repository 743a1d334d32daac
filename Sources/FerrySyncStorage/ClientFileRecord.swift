import FerryCore

/// What the server knows of one client file (one device's database).
public struct ClientFileRecord: Sendable, Equatable {
    public var ident: UInt64
    public var salt: UInt64
    public var userId: String
    /// The last client version whose changes are durable here.
    public var acknowledgedClientVersion: UInt64
    public var subscriptionVersion: UInt64
    public var subscriptions: [Subscription]
    /// When the client file last bound or uploaded (seconds since the epoch; 0: unknown).
    public var lastSeen: Int = 0
    /// The compensating writes sent to the file, kept to send again when their answer was lost
    /// (`RefusalLedger`).
    public var refusals = RefusalLedger()
    public init(ident: UInt64, salt: UInt64, userId: String, acknowledgedClientVersion: UInt64, subscriptionVersion: UInt64,
                subscriptions: [Subscription], lastSeen: Int = 0) {
        self.ident = ident
        self.salt = salt
        self.userId = userId
        self.acknowledgedClientVersion = acknowledgedClientVersion
        self.subscriptionVersion = subscriptionVersion
        self.subscriptions = subscriptions
        self.lastSeen = lastSeen
    }
}
