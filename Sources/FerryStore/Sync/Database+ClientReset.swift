import FerryCore

/// Client reset (SPEC F-RESET, F-RECOVERY): the file's synced data becomes the server's fresh
/// state, in place, in one transaction, so the host keeps its handles, its notifications fire
/// for what changed, and a crash at any point leaves either the old file or the reset one.
extension Database {
    /// The identity and version a reset file continues from: what the fresh bind gave.
    public struct ResetTarget: Sendable {
        public var clientFileIdent: UInt64
        public var clientFileSalt: UInt64
        public var serverVersion: UInt64
        public init(clientFileIdent: UInt64, clientFileSalt: UInt64, serverVersion: UInt64) {
            self.clientFileIdent = clientFileIdent
            self.clientFileSalt = clientFileSalt
            self.serverVersion = serverVersion
        }
    }

    /// Replaces the synced data with `fresh` (the whole objects and erases of a fresh download,
    /// in the order they came), takes the new client file identity, and then either recovers
    /// the unsynced local changes on top (`recover`) or discards them (each entry of the report
    /// then gives `discardReason`).
    ///
    /// Recovery works on the device's final state of every object its unsynced changes
    /// touched, by the rules of SPEC F-RECOVERY:
    /// - an object created on the device and unknown to the server is created (uploaded);
    /// - an object the server no longer has but the device only updated stays deleted;
    /// - an object the device deleted is deleted;
    /// - a field the device set gets the device's value (the device's update wins); integer
    ///   adds are replayed as adds on the server's value (they commute);
    /// - a list the device changed becomes the device's final list (as Realm does).
    /// The recovered changes are one new local changeset, uploaded like any other.
    ///
    /// A server object that does not fit this file's schema (a breaking schema difference)
    /// throws `schemaMismatch` before anything changes: such a reset needs the manual path.
    @discardableResult
    public func resetToServerState(_ fresh: [Instruction], target: ResetTarget, recover: Bool, discardReason: String) throws -> ClientResetReport {
        var report = ClientResetReport(recovered: recover, entries: [], unsyncedChangesets: 0)
        try writingStore { c in
            let store = self.storeForSync
            let acknowledged = try Self.getMeta(c, "sync.acknowledged")
            let latest = try Self.latestVersion(c)

            // The unsynced changes, grouped by object, and each object's state on the device.
            var order: [ObjectKeyRef] = []
            var changes: [ObjectKeyRef: [Instruction]] = [:]
            let history = try c.statement("SELECT changeset FROM __ferry_history WHERE version > ? ORDER BY version")
            history.bind(1, Int64(bitPattern: acknowledged))
            while try history.step() {
                report.unsyncedChangesets += 1
                for i in try ChangesetCodec.decode(history.blob(0)).instructions {
                    let ref = ObjectKeyRef(table: i.table, key: i.key)
                    if changes[ref] == nil { order.append(ref) }
                    changes[ref, default: []].append(i)
                }
            }
            history.resetKeepingBindings()
            var deviceRows: [ObjectKeyRef: [FerryValue]] = [:]
            for ref in order {
                if let ci = try? store.classIndex(named: ref.table), let row = try store.readRow(c, ci, key: ref.key) { deviceRows[ref] = row }
            }

            // The server's state replaces the synced data.
            let server = try ServerState(fresh, store: store)
            var applied: [Instruction] = []
            for ci in store.schema.classes.indices {
                let layout = store.layout(ci)
                let name = layout.objectSchema.name
                let objects = server.objects[ci] ?? [:]
                var local: [FerryValue: [FerryValue]] = [:]
                for row in try store.allRows(c, layout) { local[row[layout.primaryKeyIndex]] = row }
                for key in local.keys where objects[key] == nil {
                    _ = try store.deleteRowIfExists(c, ci, key: key)
                    applied.append(.erase(table: name, key: key))
                }
                for key in server.order[ci] ?? [] {
                    guard let row = objects[key], local[key] != row else { continue }
                    try store.upsertRow(c, ci, row)
                    applied.append(.create(table: name, key: key, fields: layout.fields(of: row)))
                }
            }

            // The unsynced changes: recovered on top, or discarded.
            var recovered: [Instruction] = []
            for ref in order {
                let ops = changes[ref] ?? []
                guard recover else {
                    report.entries.append(.init(objectType: ref.table, primaryKey: ref.key, outcome: .discarded, reason: discardReason))
                    continue
                }
                guard let ci = try? store.classIndex(named: ref.table) else {
                    report.entries.append(.init(objectType: ref.table, primaryKey: ref.key, outcome: .discarded,
                                                reason: "its class is not in this database's schema"))
                    continue
                }
                let (instructions, entry) = try Self.recover(ref, ops, device: deviceRows[ref], current: try store.readRow(c, ci, key: ref.key),
                                                             layout: store.layout(ci))
                recovered += instructions
                report.entries.append(entry)
            }
            for i in recovered { try store.apply(i, on: c) }
            applied += recovered

            // The new identity; the old history is settled (kept: the last row keeps version
            // numbers growing); the recovered changes are the upload queue.
            try Self.putMeta(c, "sync.ident", target.clientFileIdent)
            try Self.putMeta(c, "sync.salt", target.clientFileSalt)
            try Self.putMeta(c, "sync.server_version", target.serverVersion)
            try Self.putMeta(c, "sync.acknowledged", latest)
            try c.exec("DELETE FROM __ferry_sync_bases")
            // The sync engine's notes about earlier failed resets are settled with this one.
            try c.exec("DELETE FROM __ferry_meta WHERE key LIKE 'sync.value.client_reset.%'")
            let trim = try c.statement("DELETE FROM __ferry_history WHERE version < ?")
            trim.bind(1, Int64(bitPattern: latest))
            try trim.run()
            trim.resetKeepingBindings()
            let base = try c.statement("INSERT INTO __ferry_sync_bases (history_version, server_version) VALUES (?, ?)")
            base.bind(1, Int64(bitPattern: latest)); base.bind(2, Int64(bitPattern: target.serverVersion))
            try base.run()
            base.resetKeepingBindings()
            if !recovered.isEmpty {
                let encoded = ChangesetCodec.encode(Changeset(timestamp: try store.nextTimestamp(), instructions: recovered))
                let s = try c.statement("INSERT INTO __ferry_history (changeset) VALUES (?)")
                s.bind(1, blob: encoded)
                try s.run()
                s.resetKeepingBindings()
            }
            return applied.isEmpty ? nil : applied
        }
        return report
    }

    /// The instructions that put one object's unsynced changes on top of the server's state,
    /// and the report's entry for it.
    private static func recover(_ ref: ObjectKeyRef, _ ops: [Instruction], device: [FerryValue]?, current: [FerryValue]?,
                                layout: TableLayout) throws -> ([Instruction], ClientResetReport.Entry) {
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
                return ([.create(table: ref.table, key: ref.key, fields: layout.fields(of: device))], entry(.recovered, "created on this device and not yet synced"))
            }
            return ([], entry(.discarded, "deleted on the server: the device's updates to it are discarded"))
        }
        // Both have it: the device's writes win field by field.
        let os = layout.objectSchema
        var written: Set<Int> = []
        var adds: [Int: Int64] = [:]
        for op in ops {
            switch op {
            case .create, .erase:
                // Created (or deleted and created again) here: every field is the device's.
                written.formUnion(os.properties.indices.filter { $0 != layout.primaryKeyIndex })
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
}

/// The server's state from a fresh download: each class's objects as rows, in arrival order.
private struct ServerState {
    var objects: [Int: [FerryValue: [FerryValue]]] = [:]
    var order: [Int: [FerryValue]] = [:]

    init(_ fresh: [Instruction], store: Store) throws {
        for i in fresh {
            guard let ci = try? store.classIndex(named: i.table) else { continue } // a class this device does not have
            switch i {
            case let .create(_, key, fields):
                if objects[ci]?[key] == nil { order[ci, default: []].append(key) }
                do { objects[ci, default: [:]][key] = try store.rowFromServer(ci, key: key, fields: fields) } catch let e as FerryError {
                    throw FerryError(.schemaMismatch, "the server's \(i.table) \(key.debugText) does not fit this database's schema: \(e.message)")
                }
            case let .erase(_, key):
                objects[ci]?[key] = nil
            default:
                throw FerryError(.internal, "a fresh download holds whole objects and erases, not '\(i)'")
            }
        }
    }
}

extension TableLayout {
    /// A row as create fields (every property but the primary key).
    func fields(of row: [FerryValue]) -> [FieldValue] {
        objectSchema.properties.indices.filter { $0 != primaryKeyIndex }.map { FieldValue(name: objectSchema.properties[$0].name, value: row[$0]) }
    }
}
