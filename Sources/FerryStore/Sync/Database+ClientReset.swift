import FerryCore
import FerrySQLite

/// Client reset (SPEC F-RESET, F-RECOVERY): the file's synced data becomes the server's fresh
/// state, in place, in one transaction, so the host keeps its handles, its notifications fire
/// for what changed, and a crash at any point leaves either the old file or the reset one.
extension Database {
    /// The identity and version a reset file continues from: what the fresh bind gave.
    package struct ResetTarget: Sendable {
        package var clientFileIdent: UInt64
        package var clientFileSalt: UInt64
        package var serverVersion: UInt64
        package init(clientFileIdent: UInt64, clientFileSalt: UInt64, serverVersion: UInt64) {
            self.clientFileIdent = clientFileIdent
            self.clientFileSalt = clientFileSalt
            self.serverVersion = serverVersion
        }
    }

    /// `resetToServerState(target:recover:discardReason:)` with the fresh state given in
    /// memory (the whole objects and erases of a fresh download, in the order they came): it is
    /// staged first, as the sync engine stages a download as it arrives. For tests and small
    /// states; the engine never holds a whole fresh state.
    @discardableResult
    package func resetToServerState(_ fresh: [Instruction], target: ResetTarget, recover: Bool, discardReason: String) throws -> ClientResetReport {
        try clearStagedResetDownload()
        try stageResetDownload([ChangesetCodec.encode(Changeset(timestamp: 0, instructions: fresh))])
        do {
            return try resetToServerState(target: target, recover: recover, discardReason: discardReason)
        } catch {
            // Only space is at stake: the next reset clears the staging before it stages.
            try? clearStagedResetDownload()
            throw error
        }
    }

    /// Replaces the synced data with the fresh download staged in the file
    /// (`stageResetDownload`: whole objects and erases, in the order they came), takes the new
    /// client file identity, and then either recovers the unsynced local changes on top
    /// (`recover`) or discards them (each entry of the report then gives `discardReason`). The
    /// staged download is cleared in the same transaction; if the reset throws, nothing
    /// changed and the download stays staged (a failed recovery can be followed by a discard).
    ///
    /// Memory follows one staged changeset (about one downloaded message), not the state: the
    /// staged changesets are read back and applied one at a time, the keys of the fresh
    /// objects are kept in a temporary SQLite table (on disk past SQLite's page cache) to find
    /// the local objects the server no longer has, and those are removed page by page. What
    /// is held in full is what belongs to the device's unsynced changes (the objects they
    /// touched, the report) and, only when observers are registered, the keys of the changed
    /// objects for their notifications.
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
    /// throws `schemaMismatch` and changes nothing: such a reset needs the manual path. A
    /// staged changeset that does not decode throws `corrupt`.
    @discardableResult
    package func resetToServerState(target: ResetTarget, recover: Bool, discardReason: String) throws -> ClientResetReport {
        var report = ClientResetReport(recovered: recover, entries: [], unsyncedChangesets: 0)
        var peak = 0
        try writingStoreChanges { c in
            let store = self.storeForSync
            let observed = store.hasObservers || store.logsChanges
            var changes = CommittedChanges([])
            let acknowledged = try Self.getMeta(c, "sync.acknowledged")
            let latest = try Self.latestVersion(c)

            // The unsynced changes, grouped by object, and each object's state on the device.
            var order: [ObjectKey] = []
            var unsynced: [ObjectKey: [Instruction]] = [:]
            // Per unsynced changeset, the objects it wrote: its write receipt's fate follows theirs.
            var receipts: [(version: UInt64, objects: Set<ObjectKey>)] = []
            let history = try c.statement("SELECT version, changeset FROM __ferry_history WHERE version > ? ORDER BY version")
            history.bind(1, Int64(bitPattern: acknowledged))
            while try history.step() {
                report.unsyncedChangesets += 1
                var objects: Set<ObjectKey> = []
                for i in try ChangesetCodec.decode(history.blob(1)).instructions {
                    let ref = ObjectKey(table: i.table, key: i.key)
                    if unsynced[ref] == nil { order.append(ref) }
                    unsynced[ref, default: []].append(i)
                    objects.insert(ref)
                }
                receipts.append((UInt64(bitPattern: history.int64(0)), objects))
            }
            history.resetKeepingBindings()
            var deviceRows: [ObjectKey: [FerryValue]] = [:]
            for ref in order {
                if let ci = store.schema.classIndex(named: ref.table), let row = try store.readRow(c, ci, key: ref.key) { deviceRows[ref] = row }
            }

            // The server's state replaces the synced data: each staged object is written over
            // the device's (kept in place when equal, so nothing is reported for it) and its
            // key noted; then the objects without a note are the ones the server no longer has.
            try c.exec(ResetDownloadStaging.createSQL)
            try c.exec("""
                CREATE TEMP TABLE IF NOT EXISTS __ferry_reset_keys (class INTEGER NOT NULL, key NOT NULL, PRIMARY KEY (class, key)) WITHOUT ROWID;
                DELETE FROM temp.__ferry_reset_keys;
                """)
            let note = try c.statement("INSERT OR IGNORE INTO temp.__ferry_reset_keys (class, key) VALUES (?, ?)")
            let unnote = try c.statement("DELETE FROM temp.__ferry_reset_keys WHERE class = ? AND key = ?")
            func mark(_ s: Statement, _ ci: Int, _ key: FerryValue) throws {
                defer { s.resetKeepingBindings() }
                s.bind(1, Int64(ci))
                ColumnCodec.bind(key, to: s, at: 2)
                try s.run()
            }
            let propertyNames = store.schema.classes.map { os in os.properties.filter { !$0.isPrimaryKey }.map(\.name) }
            var classes: [String: Int] = [:]
            peak = try ResetDownloadStaging.forEachChangeset(c) { instructions in
                for i in instructions {
                    let ci: Int
                    if let known = classes[i.table] { ci = known } else {
                        guard let found = try? store.classIndex(named: i.table) else { continue } // a class this device does not have
                        classes[i.table] = found
                        ci = found
                    }
                    switch i {
                    case let .create(_, key, fields):
                        let row: [FerryValue]
                        do { row = try store.rowFromServer(ci, key: key, fields: fields) } catch let e as FerryError {
                            throw FerryError(.schemaMismatch, "the server's \(i.table) \(key.debugText) does not fit this database's schema: \(e.message)")
                        }
                        if try store.readRow(c, ci, key: key) != row {
                            try store.upsertRow(c, ci, row)
                            if observed { changes.recordWhole(table: i.table, key: key, properties: propertyNames[ci]) }
                        }
                        try mark(note, ci, key)
                    case let .erase(_, key):
                        if try store.deleteRowIfExists(c, ci, key: key), observed { changes.record(i) }
                        try mark(unnote, ci, key)
                    default:
                        throw FerryError(.corrupt, "a fresh download holds whole objects and erases, not '\(i)'")
                    }
                }
            }
            for ci in store.schema.classes.indices {
                let layout = store.layout(ci)
                let pk = layout.objectSchema.properties[layout.primaryKeyIndex]
                // By rowid, a page at a time: deleting while a query walks the same table is
                // not something to rely on, and a page bounds what is held.
                let gone = try c.statement("""
                    SELECT rowid, \(layout.primaryKeyColumn) FROM \(layout.table) WHERE rowid > ?
                    AND \(layout.primaryKeyColumn) NOT IN (SELECT key FROM temp.__ferry_reset_keys WHERE class = ?)
                    ORDER BY rowid LIMIT 256
                    """)
                var after = Int64.min
                while true {
                    gone.bind(1, after)
                    gone.bind(2, Int64(ci))
                    var keys: [FerryValue] = []
                    do {
                        defer { gone.resetKeepingBindings() }
                        while try gone.step() {
                            after = gone.int64(0)
                            keys.append(try ColumnCodec.read(gone, 1, pk))
                        }
                    }
                    if keys.isEmpty { break }
                    for key in keys {
                        _ = try store.deleteRowIfExists(c, ci, key: key)
                        if observed { changes.record(.erase(table: layout.objectSchema.name, key: key)) }
                    }
                }
            }

            // The unsynced changes: recovered on top, or discarded.
            var recovered: [Instruction] = []
            for ref in order {
                let ops = unsynced[ref] ?? []
                guard recover else {
                    report.entries.append(.init(objectType: ref.table, primaryKey: ref.key, outcome: .discarded, reason: discardReason))
                    continue
                }
                guard let ci = store.schema.classIndex(named: ref.table) else {
                    report.entries.append(.init(objectType: ref.table, primaryKey: ref.key, outcome: .discarded,
                                                reason: "its class is not in this database's schema"))
                    continue
                }
                let (instructions, entry) = ResetRecovery.recover(ref, ops, device: deviceRows[ref], current: try store.readRow(c, ci, key: ref.key),
                                                                  schema: store.layout(ci).objectSchema)
                recovered += instructions
                report.entries.append(entry)
            }
            for i in recovered {
                try store.apply(i, on: c)
                if observed { changes.record(i) }
            }

            // The new identity; the old history is settled (kept: the last row keeps version
            // numbers growing); the recovered changes are the upload queue; the staged download
            // is spent.
            try Self.putMeta(c, "sync.ident", target.clientFileIdent)
            try Self.putMeta(c, "sync.salt", target.clientFileSalt)
            try Self.putMeta(c, "sync.server_version", target.serverVersion)
            try Self.putMeta(c, "sync.acknowledged", latest)
            try Self.putMeta(c, "sync.answered", latest)
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
            var recoveredVersion: UInt64 = 0
            if !recovered.isEmpty {
                let encoded = ChangesetCodec.encode(Changeset(timestamp: try store.nextTimestamp(), instructions: recovered))
                let s = try c.statement("INSERT INTO __ferry_history (changeset) VALUES (?)")
                s.bind(1, blob: encoded)
                try s.run()
                s.resetKeepingBindings()
                recoveredVersion = UInt64(bitPattern: c.lastInsertRowID)
            }
            try Self.settleReceiptsOfReset(c, receipts, entries: report.entries, recoveredVersion: recoveredVersion)
            try c.exec("DELETE FROM __ferry_reset_download; DELETE FROM temp.__ferry_reset_keys;")
            return observed && !changes.isEmpty ? changes : nil
        }
        recordResetPeak(peak)
        return report
    }
}
