import FerryCore

/// One object a write transaction changed: as it was when the transaction began (nil: it did
/// not exist) and as the commit leaves it (nil: deleted), values in `objectSchema` order.
package struct ObjectWrite: Sendable {
    package let objectSchema: ObjectSchema
    package let key: FerryValue
    package let before: [FerryValue]?
    package let after: [FerryValue]?

    package init(objectSchema: ObjectSchema, key: FerryValue, before: [FerryValue]?, after: [FerryValue]?) {
        self.objectSchema = objectSchema
        self.key = key
        self.before = before
        self.after = after
    }
}

/// A check every local commit of a store runs on what its transaction wrote: the pre-flight
/// check of a synced database (SPEC F-PRECHECK), installed by its sync session. Without one
/// (the default, and the `off` mode) a commit reads nothing extra, so the insert path costs
/// what it did; with one, the commit reads each written object twice (the last commit's
/// state through the reader, the new one through the writer): there is no capture on the
/// write path.
package protocol CommitCheck: AnyObject, Sendable {
    /// A rejection fails the commit (strict) instead of only being reported (warn).
    var rejectsCommit: Bool { get }
    /// The would-be compensating writes of a transaction (empty: it passes). Called inside the
    /// transaction with the store's write lock and the handle's lock held: must not call into
    /// the database.
    func check(_ writes: [ObjectWrite]) -> [CompensatingWrite]
    /// Hands a non-empty finding to the host, after the commit (`committed`) or the rollback,
    /// on the committing thread, with no lock of the database held.
    func report(_ rejected: [CompensatingWrite], committed: Bool)
}

extension Database {
    /// Installs (or with nil removes) the check every commit on this handle's file runs, from
    /// any handle of this process.
    package func setCommitCheck(_ check: (any CommitCheck)?) { storeForSync.setCommitCheck(check) }

    /// The objects a transaction's instructions touched, before and after (see `ObjectWrite`).
    func objectWrites(_ instructions: [Instruction], store: Store) throws -> [ObjectWrite] {
        var seen: Set<ObjectKey> = []
        var out: [ObjectWrite] = []
        for i in instructions {
            guard seen.insert(ObjectKey(table: i.table, key: i.key)).inserted,
                  let ci = store.schema.classIndex(named: i.table) else { continue }
            let before = try store.read { try store.readRow($0, ci, key: i.key) }
            let after = try store.readRow(store.writer, ci, key: i.key)
            out.append(ObjectWrite(objectSchema: store.schema.classes[ci], key: i.key, before: before, after: after))
        }
        return out
    }
}

/// A strict pre-flight check refused the transaction: the commit rolls back and fails with
/// `writeRejected`, whose message gives every reason (the first 20).
struct PrecheckRejection: Error {
    let error: FerryError
    init(_ rejected: [CompensatingWrite]) {
        let shown = rejected.prefix(20).map(\.reason).joined(separator: "; ")
        let more = rejected.count > 20 ? "; and \(rejected.count - 20) more" : ""
        error = FerryError(.writeRejected, "the server would reject this write transaction; it was rolled back: \(shown)\(more)")
    }
}
