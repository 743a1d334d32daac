import FerryCore

/// One object changed after a version, as a catching-up device may need it.
public struct ChangedObject: Sendable {
    public var key: FerryValue
    /// The object now; nil for a tombstone.
    public var object: StampedObject?
    /// A tombstone's values before the erase (see `StoredObject.erasedState`).
    public var erasedState: StampedObject?
    /// The server version of the last change.
    public var version: UInt64
    /// The client file whose write made `version` (nil for rows written before the store
    /// recorded it): the change feed says who made a change from its user.
    public var author: UInt64?
    public init(key: FerryValue, object: StampedObject?, erasedState: StampedObject?, version: UInt64, author: UInt64? = nil) {
        self.key = key
        self.object = object
        self.erasedState = erasedState
        self.version = version
        self.author = author
    }
}
