import FerryCore

/// An object's merge state as stored: the object (nil once erased: a tombstone, kept so a
/// client catching up learns of the erase) and its recent list operations.
public struct StoredObject: Sendable, Equatable {
    public var object: StampedObject?
    public var lists: ListOperationLog
    /// A tombstone's last values before the erase: who may learn of the erase is decided on
    /// them (a device is told an object's primary key only if its user may read the object).
    /// nil for live objects, and for tombstones written before the store kept them (then no
    /// catching-up device is told of the erase).
    public var erasedState: StampedObject?
    public init(object: StampedObject?, lists: ListOperationLog = ListOperationLog(), erasedState: StampedObject? = nil) {
        self.object = object
        self.lists = lists
        self.erasedState = erasedState
    }
}

/// One object changed after a version, as a catching-up device may need it.
public struct ChangedObject: Sendable {
    public var key: FerryValue
    /// The object now; nil for a tombstone.
    public var object: StampedObject?
    /// A tombstone's values before the erase (see `StoredObject.erasedState`).
    public var erasedState: StampedObject?
    /// The server version of the last change.
    public var version: UInt64
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
    /// The objects of `schema`'s class changed after `version`, in version order.
    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws
    /// Every live object of a class.
    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws
    /// Runs `body` on a read-only snapshot of the store taken now, on the caller's thread,
    /// beside the writer: long reads (a new subscription set's view) do not hold up uploads.
    func withSnapshot<T>(_ body: (SyncSnapshot) throws -> T) throws -> T
    /// How many client files a user has.
    func clientFileCount(userId: String) throws -> Int
    /// Forgets the user's least recently seen client file (that device resets when it returns).
    func forgetLeastRecentClientFile(userId: String) throws
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
