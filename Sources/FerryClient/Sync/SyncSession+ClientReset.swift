#if canImport(Glibc)
import Glibc
#endif
import FerryCore
import FerryStore

/// Client reset on the session's side (SPEC F-RESET, F-RESETMODES; loop thread): the server
/// refused the file's identity, so the session binds it again as a new client file, stages the
/// fresh download of its subscriptions in the file as it arrives, and has the database become
/// that state in one transaction, recovering or discarding the unsynced changes as the mode
/// says. The host keeps its handles; its notifications report what changed; the error handler
/// gets the report.
extension SyncSession {
    /// Where the file counts its failed resets in a row (`ClientResetRun.maxFailures`).
    static let resetFailuresKey = "client_reset.failures"

    /// The server refused the file's identity: a run as the mode says, or the host's to do.
    func beginClientReset(_ error: SyncError) {
        guard !closed, fatal == nil else { return }
        run(machine.beginReset(error, mode: resetMode, failures: resetFailures(), database: path))
    }

    /// A run starts from scratch: whatever an earlier run staged (abandoned, or cut short by a
    /// crash) is not part of this one's download. False if it could not (the run failed).
    func startClientReset(_ run: ClientResetRun) -> Bool {
        app.log(.info, "client reset of \(path) (\(run.recover ? "recovering" : "discarding") unsynced changes): \(run.error.message)")
        do { try database.clearStagedResetDownload() } catch {
            _ = machine.abandonReset()
            resetFailed(run, error)
            return false
        }
        return true
    }

    /// The server gave the reset file its new identity: ask for the subscriptions' data.
    func resetIdentified(ident: UInt64, salt: UInt64) {
        guard let run = reset else { return }
        let set: SubscriptionSet
        do { set = try SubscriptionSet.load(database) } catch {
            // Not "no subscriptions": that would take an empty server state as the file's.
            _ = machine.abandonReset()
            return resetFailed(run, error)
        }
        self.run(machine.resetIdentified(ident: ident, salt: salt, version: set.version, subscriptions: set.subscriptions))
    }

    /// One DOWNLOAD message of the fresh state (checked by the machine), staged in the file in
    /// a transaction of its own, so the session never holds more than this message.
    func resetDownloaded(serverVersion: UInt64, subscriptionVersion: UInt64, isLast: Bool, changesets: [DownloadChangeset]) {
        guard let run = reset else { return }
        do { try database.stageResetDownload(changesets.map(\.changeset)) } catch {
            _ = machine.abandonReset()
            return resetFailed(run, error)
        }
        let effects = machine.resetStaged(changesets.count, serverVersion: serverVersion, subscriptionVersion: subscriptionVersion, isLast: isLast)
        resetStagingProbe?(reset?.stagedChangesets ?? 0)
        // The probe may have cut the connection, which abandons the run.
        guard reset != nil else { return }
        self.run(effects)
    }

    /// The reset in progress is given up (its connection was lost, or the session closed): its
    /// staged download goes, and the next run, if any, starts from scratch.
    func abandonClientReset() {
        guard machine.abandonReset() else { return }
        clearAbandonedReset()
    }

    /// Clears what an abandoned run staged.
    func clearAbandonedReset() {
        do { try database.clearStagedResetDownload() } catch {
            // Costs only the space: the next reset clears the staging before it stages.
            app.log(.warn, "\(path): cannot clear an abandoned client reset's staged download: \(error)")
        }
    }

    /// The fresh download is complete: apply it, then sync on as the new client file.
    func finishClientReset(serverVersion: UInt64) {
        guard let run = machine.takeResetToFinish() else { return }
        let target = Database.ResetTarget(clientFileIdent: run.ident, clientFileSalt: run.salt, serverVersion: serverVersion)
        // The callbacks get a read-only snapshot of the database as it was.
        var snapshot: (db: Database, path: String)?
        if beforeReset != nil || afterReset != nil {
            do { snapshot = try takeSnapshot() } catch { return resetFailed(run, error) }
        }
        func dropSnapshot() {
            guard let snapshot else { return }
            snapshot.db.close()
            Self.removeSnapshotFile(snapshot.path)
        }
        if let snapshot { beforeReset?(snapshot.db) }
        var report: ClientResetReport
        do {
            report = try database.resetToServerState(target: target, recover: run.recover, discardReason: run.discardReason)
        } catch let e as FerryError where e.code == .schemaMismatch {
            // No mode can apply a state this schema cannot hold, now or at a retry: the host
            // must (SPEC F-RESET: a breaking schema difference goes to the manual handler).
            dropSnapshot()
            try? database.clearStagedResetDownload()
            var handed = run.error
            handed.message += " (the client reset cannot be done automatically: \(e.message); the host must handle it)"
            return handOver(handed)
        } catch let recoveryError where run.recover && resetMode == .recoverOrDiscardUnsyncedChanges {
            // Recovery did not work: this mode discards instead.
            do {
                // The failed attempt rolled back and left the staged download for this one.
                report = try database.resetToServerState(target: target, recover: false,
                                                         discardReason: "recovery failed: \(recoveryError)")
            } catch {
                dropSnapshot()
                return resetFailed(run, error)
            }
        } catch {
            dropSnapshot()
            return resetFailed(run, error)
        }
        let meta: SyncMetadata
        do { meta = try database.syncMetadata() } catch {
            dropSnapshot()
            return fail(SyncError(code: ProtocolError.Code.local, message: "cannot read the sync state of \(path) after its client reset: \(error)", isFatal: true, action: .applicationBug))
        }
        // Waits for changes the reset settled: the recovered ones are uploaded as one new
        // changeset, which such a wait now waits for; discarded ones leave nothing to wait for.
        let latest = (try? database.latestLocalVersion()) ?? meta.acknowledged
        // The data is now the whole view of the set the reset asked for.
        self.run(machine.resetApplied(acknowledged: meta.acknowledged, latest: latest, queryVersion: run.queryVersion))
        let recovered = report.entries.filter { $0.outcome == .recovered }.count
        app.log(.info, "client reset of \(path) done: \(recovered) objects recovered, \(report.entries.count - recovered) discarded")
        if let snapshot { afterReset?(snapshot.db, database, report) }
        dropSnapshot()
        app.report(SyncError(code: run.error.code, message: "client reset done: \(run.error.message)", isFatal: false,
                             action: run.error.action, clientResetReport: report), session: self)
        self.run(machine.resetDone())
    }

    /// A copy of the database as it is, opened read-only, next to it (or in /tmp for an
    /// in-memory database).
    private func takeSnapshot() throws -> (db: Database, path: String) {
        let base = database.isInMemory ? "/tmp/ferry-memory" : path
        let snapshotPath = base + ".before-reset-\(UInt64.random(in: 0...UInt64.max))"
        try database.writeCopy(toPath: snapshotPath)
        do {
            let db = try Database.open(DatabaseConfiguration(location: .file(snapshotPath), schema: nil, readOnly: true,
                                                             encryptionKey: database.encryptionKey),
                                       scheduler: PollingScheduler())
            return (db, snapshotPath)
        } catch {
            Database.removeFile(snapshotPath)
            throw error
        }
    }

    /// Removes the snapshots (`takeSnapshot`) of resets of `path` that did not finish: the
    /// process died while the callbacks ran.
    static func removeStaleSnapshots(of path: String) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let prefix = (slash.map { String(path[path.index(after: $0)...]) } ?? path) + ".before-reset-"
        guard let dir = opendir(directory.isEmpty ? "/" : directory) else { return }
        var stale: [String] = []
        while let entry = readdir(dir) {
            // Read up to the NUL only: the rest of d_name is uninitialised.
            let name = withUnsafeMutablePointer(to: &entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name.hasPrefix(prefix), !name.hasSuffix("-wal"), !name.hasSuffix("-shm"), !name.hasSuffix(".sync-agent") {
                stale.append((directory.isEmpty ? "" : directory) + "/" + name)
            }
        }
        closedir(dir)
        for file in stale { removeSnapshotFile(file) }
    }

    /// Deletes a snapshot with its WAL files and the agent lock file its open created.
    private static func removeSnapshotFile(_ path: String) {
        Database.removeFile(path)
        unlink(path + ".sync-agent")
    }

    /// Leaves the reset to the host (SPEC F-RESETMANUAL): the error names where the file will
    /// be backed up and carries the token of `App.immediatelyHandleClientReset`; the file is
    /// marked so that its next open performs the reset if the host never calls it.
    func handOver(_ error: SyncError) {
        var e = error
        if !database.isInMemory {
            let backup = path + ".reset-backup-\(Self.secondsSinceEpoch())"
            do {
                try database.setSyncValue(SyncSession.pendingResetKey, Array(backup.utf8))
            } catch {
                // Unmarked, a later open does not perform the reset: the host must, now.
                app.log(.error, "cannot mark the client reset of \(path) as pending: \(error)")
                e.message += " (the reset could not be marked in the file (\(error)): the next open will not perform it; call immediatelyHandleClientReset)"
            }
            e.clientResetBackupPath = backup
            e.clientResetToken = path
        }
        fail(e)
    }

    static let pendingResetKey = "client_reset.pending"

    /// The backup path of a reset left to the host, if the file has one pending.
    static func pendingResetBackup(_ db: Database) throws -> String? {
        guard let bytes = try db.syncValue(pendingResetKey), !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func secondsSinceEpoch() -> Int { Int(WallClock.system.secondsSinceEpoch()) }

    private func resetFailed(_ run: ClientResetRun, _ error: Error) {
        // The next try downloads again; what this one staged would only take space.
        try? database.clearStagedResetDownload()
        let failures = resetFailures() + 1
        var bytes: [UInt8] = []
        var n = failures
        for _ in 0..<8 { bytes.append(UInt8(n & 0xff)); n >>= 8 }
        var e = run.error
        e.message = "the client reset failed (\(error)); the database keeps its data and the reset is tried again on the next open: \(run.error.message)"
        do { try database.setSyncValue(Self.resetFailuresKey, bytes) } catch {
            // Uncounted, a reset that always fails would be tried on every open for ever.
            app.log(.error, "cannot count the failed client reset of \(path): \(error)")
            e.message += " (the failure could not be counted: \(error))"
        }
        fail(e)
    }

    private func resetFailures() -> UInt64 {
        let stored: [UInt8]?
        do { stored = try database.syncValue(Self.resetFailuresKey) } catch {
            app.log(.error, "cannot read the count of failed client resets of \(path) (taken as 0): \(error)")
            return 0
        }
        guard let bytes = stored, bytes.count == 8 else { return 0 }
        return bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }
}
