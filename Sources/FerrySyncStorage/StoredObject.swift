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

    /// Moves what was written at server version `provisional` to `version`: the object's
    /// properties, a tombstone's last values and the list operations (see
    /// `StampedObject.restamp`).
    public mutating func restamp(_ provisional: UInt64, to version: UInt64) {
        object?.restamp(provisional, to: version)
        erasedState?.restamp(provisional, to: version)
        lists.restamp(provisional, to: version)
    }
}
