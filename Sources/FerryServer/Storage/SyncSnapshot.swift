import FerryCore

/// A consistent read-only view of the sync store at one moment. The hub evaluates a new
/// subscription set's view on one, off the hub, then catches up from the snapshot's version.
public protocol SyncSnapshot: AnyObject {
    /// Every live object of a class.
    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) throws -> Void) throws
    /// The objects of `schema`'s class changed after `version`, in version order.
    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) throws
}
