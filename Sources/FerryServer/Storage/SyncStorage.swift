import FerryCore

/// An object's merge state as stored: the object (nil once erased: a tombstone, kept so a
/// client catching up learns of the erase) and its recent list operations.
public struct StoredObject: Sendable, Equatable {
    public var object: StampedObject?
    public var lists: ListOperationLog
    public init(object: StampedObject?, lists: ListOperationLog = ListOperationLog()) {
        self.object = object
        self.lists = lists
    }
}

/// Identifies an object across classes.
public struct ObjectKey: Hashable, Sendable {
    public var table: String
    public var key: FerryValue
    public init(table: String, key: FerryValue) {
        self.table = table
        self.key = key
    }
}

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
}

/// The server's durable state, behind a protocol so the embedded SQLite store and PostgreSQL
/// (later) are interchangeable. Calls come from one task at a time (the sync hub), so
/// implementations need not order concurrent writers themselves.
public protocol SyncStorage: AnyObject, Sendable {
    /// The latest server version (0 for an empty store).
    func serverVersion() throws -> UInt64
    func newClientFile(userId: String) throws -> ClientFileRecord
    func clientFile(_ ident: UInt64) throws -> ClientFileRecord?
    func saveSubscriptions(clientFile: UInt64, version: UInt64, subscriptions: [Subscription]) throws
    func object(_ key: ObjectKey, schema: ObjectSchema) throws -> StoredObject?
    /// Makes one upload durable in one transaction: the merged objects at server version
    /// `version` and the client's acknowledged version. Returns only once it is on disk.
    func commit(version: UInt64, objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64) throws
    /// The objects of `schema`'s class changed after `version`, with the version of each.
    func changes(since version: UInt64, schema: ObjectSchema, _ body: (FerryValue, StampedObject?, UInt64) throws -> Void) throws
    /// Every live object of a class.
    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws
    /// Runs `body` in one write transaction: reads see one state, the writes of `commit`
    /// inside it become durable together when `body` returns (rolled back if it throws).
    func transaction(_ body: () throws -> Void) throws
    /// Forgets every client file (sync terminated and enabled again: devices must reset).
    func forgetClientFiles() throws
    /// Forgets one client file (offline longer than the client maximum offline time).
    func forgetClientFile(_ ident: UInt64) throws
    /// Records that the client file was seen now (a bind).
    func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) throws
    func close()
}
