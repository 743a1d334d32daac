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
    /// The stored refusal ledger (empty: none), decoded only when asked (`refusals`): every
    /// upload reads its client file, and only a BIND and an upload with refusals need it.
    public var refusalBytes: [UInt8] = []
    /// The compensating writes sent to the file, kept to send again when their answer was lost
    /// (`RefusalLedger`). Throws when the stored bytes are damaged.
    public var refusals: RefusalLedger { get throws { try RefusalLedger.decode(refusalBytes) } }
    /// The ledger to add an upload's refusals to: the stored one, or a new one if it is
    /// damaged. What a damaged one held is lost: failing the upload instead would stop the
    /// device's sync for good. The device's next BIND logs damage it finds; one an upload
    /// replaced first goes unlogged (the store has no logger).
    public var refusalsToExtend: RefusalLedger { (try? RefusalLedger.decode(refusalBytes)) ?? RefusalLedger() }
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
