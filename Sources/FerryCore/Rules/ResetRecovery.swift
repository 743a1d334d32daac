/// Client-reset recovery (SPEC F-RECOVERY), decided from values: the device's unsynced changes
/// to one object, its state on the device and the server's fresh state in, the instructions
/// that put the device's changes on top and the report's entry out; and what becomes of each
/// unsynced changeset's write receipt. FerryStore's reset (`Database.resetToServerState`) reads
/// the rows, asks, and writes what these decide, in its one transaction.
///
/// The rules, per object its unsynced changes touched (its final state on the device):
/// - created on the device and unknown to the server: created (uploaded);
/// - the server no longer has it and the device only updated it: stays deleted (discarded);
/// - deleted on the device: deleted;
/// - a field the device set gets the device's value (the device's update wins); integer adds
///   are replayed as adds on the server's value (they commute);
/// - a list the device changed becomes the device's final list (as Realm does).
public enum ResetRecovery {
    /// The instructions that put one object's unsynced changes on top of the server's state,
    /// and the report's entry for it.
    public static func recover(_ ref: ObjectKey, _ ops: [Instruction], device: [FerryValue]?, current: [FerryValue]?,
                               schema os: ObjectSchema) -> ([Instruction], ClientResetReport.Entry) {
        func entry(_ outcome: ClientResetReport.Outcome, _ reason: String) -> ClientResetReport.Entry {
            .init(objectType: ref.table, primaryKey: ref.key, outcome: outcome, reason: reason)
        }
        let createdHere = ops.contains { if case .create = $0 { return true } else { return false } }
        guard let device else {
            if current != nil { return ([.erase(table: ref.table, key: ref.key)], entry(.recovered, "deleted on this device")) }
            return ([], entry(.recovered, createdHere ? "created and deleted on this device: nothing to upload" : "deleted on this device and on the server"))
        }
        guard let current else {
            if createdHere {
                return ([.create(table: ref.table, key: ref.key, fields: fields(of: device, os))], entry(.recovered, "created on this device and not yet synced"))
            }
            return ([], entry(.discarded, "deleted on the server: the device's updates to it are discarded"))
        }
        // Both have it: the device's writes win field by field.
        var written: Set<Int> = []
        var adds: [Int: Int64] = [:]
        for op in ops {
            switch op {
            case .create, .erase:
                // Created (or deleted and created again) here: every field is the device's.
                written.formUnion(os.properties.indices.filter { $0 != os.primaryKeyIndex })
            case let .set(_, _, field, _), let .listInsert(_, _, field, _, _), let .listSet(_, _, field, _, _),
                 let .listErase(_, _, field, _), let .listClear(_, _, field):
                if let p = os.propertyIndex(named: field) { written.insert(p) }
            case let .addInteger(_, _, field, delta):
                if let p = os.propertyIndex(named: field) { adds[p, default: 0] &+= delta }
            }
        }
        var out: [Instruction] = []
        var fields: [String] = []
        for p in written.sorted() where device[p] != current[p] {
            let name = os.properties[p].name
            fields.append(name)
            if os.properties[p].isList {
                out.append(.listClear(table: ref.table, key: ref.key, field: name))
                if case .list(let items) = device[p] {
                    for (i, v) in items.enumerated() { out.append(.listInsert(table: ref.table, key: ref.key, field: name, index: i, value: v)) }
                }
            } else {
                out.append(.set(table: ref.table, key: ref.key, field: name, value: device[p]))
            }
        }
        for (p, delta) in adds.sorted(by: { $0.key < $1.key }) where !written.contains(p) && delta != 0 {
            fields.append(os.properties[p].name)
            out.append(.addInteger(table: ref.table, key: ref.key, field: os.properties[p].name, delta: delta))
        }
        if fields.isEmpty { return ([], entry(.recovered, "the server already has the device's changes")) }
        return (out, entry(.recovered, "the device's updates applied over the server's: " + fields.joined(separator: ", ")))
    }

    /// A row as create fields (every property but the primary key).
    public static func fields(of row: [FerryValue], _ os: ObjectSchema) -> [FieldValue] {
        os.properties.indices.filter { $0 != os.primaryKeyIndex }.map { FieldValue(name: os.properties[$0].name, value: row[$0]) }
    }

    /// What becomes of an unsynced changeset's write receipt after the reset.
    public enum ReceiptFate: Sendable, Equatable {
        /// Rejected, with a compensating write per discarded object it wrote.
        case rejected([CompensatingWrite])
        /// Settles with the recovered changeset (its receipt follows that one's).
        case follows(version: UInt64)
        /// Nothing of it was discarded and nothing was recovered: already on the server.
        case unchanged
    }

    /// The fate of each unsynced changeset's receipt (`changesets`: its version and the objects
    /// it wrote), given the report's entries and the version of the recovered changeset (0: none).
    /// A changeset that wrote an object whose changes were discarded is rejected with those
    /// objects (in the report's order); any other follows the recovered changeset.
    public static func receiptFates(_ changesets: [(version: UInt64, objects: Set<ObjectKey>)], entries: [ClientResetReport.Entry],
                                    recoveredVersion: UInt64) -> [(version: UInt64, fate: ReceiptFate)] {
        // Indexed by object: a device that kept writing holds thousands of unsynced changesets
        // and as many entries, and comparing every pair stalled the reset (and a core) for
        // a minute in a debug build.
        var discardedByObject: [ObjectKey: [(order: Int, entry: ClientResetReport.Entry)]] = [:]
        for (order, entry) in entries.enumerated() where entry.outcome == .discarded {
            discardedByObject[ObjectKey(table: entry.objectType, key: entry.primaryKey), default: []].append((order, entry))
        }
        return changesets.map { version, objects in
            let discarded = discardedByObject.isEmpty ? [] : objects.flatMap { discardedByObject[$0] ?? [] }.sorted { $0.order < $1.order }.map(\.entry)
            if !discarded.isEmpty {
                return (version, .rejected(discarded.map {
                    CompensatingWrite(objectType: $0.objectType, primaryKey: $0.primaryKey, reason: "discarded by a client reset: \($0.reason)")
                }))
            }
            return (version, recoveredVersion > 0 ? .follows(version: recoveredVersion) : .unchanged)
        }
    }
}
