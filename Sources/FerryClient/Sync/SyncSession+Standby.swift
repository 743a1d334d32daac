import FerryCore
import FerryStore

/// A session of a process that is not its file's sync agent (SPEC F-MULTIPROC): another
/// process syncs the file. This one reads and writes it like the agent does; its commits go
/// into the file's history, which the agent uploads, and its observers hear of the agent's
/// downloads through the file (`ExternalChangeWatcher`). It does not connect. Every
/// `standbyRetryMs` it tries to take the role, which the kernel frees when the agent closes
/// the file, exits or is killed; then it connects and syncs as the agent, uploading whatever
/// the last agent left unacknowledged. Waits stay pending meanwhile.
extension SyncSession {
    static let standbyRetryMs: UInt64 = 250

    /// Loop thread: the session starts in standby.
    func enterStandby() {
        guard life.enterStandby() else { return }
        app.log(.info, "\(path): another process is the sync agent; this process writes to the file and takes the role when that process goes")
        scheduleStandbyRetry()
    }

    private func scheduleStandbyRetry() {
        if standbyTimer == nil { standbyTimer = LoopTimer(loop: app.loop) }
        standbyTimer?.schedule(afterMilliseconds: Self.standbyRetryMs) { [weak self] in
            self?.retryStandby()
        }
    }

    /// Loop thread: one try at the role.
    private func retryStandby() {
        guard !closed, fatal == nil, standby else { return }
        let agent: Bool
        do { agent = try database.becomeSyncAgent() } catch {
            app.log(.warn, "\(path): cannot take the sync agent role: \(error)")
            return scheduleStandbyRetry()
        }
        guard agent else { return scheduleStandbyRetry() }
        standbyTimer?.invalidate()
        standbyTimer = nil
        _ = life.leaveStandby()
        app.log(.info, "\(path): this process is now the sync agent")
        // What the previous agent read of the file is this process's to read again: the
        // acknowledged version and the unsynced count may have moved while it synced.
        let meta = app.attempt("\(path): reading the sync state the previous agent left", cost: "uploads start from this process's last view of it") {
            try database.syncMetadata()
        }
        if let meta {
            machine.adopt(acknowledged: meta.acknowledged)
            database.startReceiptSession(acknowledged: meta.answered)
        }
        app.attempt("\(path): counting the unsynced changes", cost: "progress counts them from the next commit") { try countLocalChanges() }
        if !paused { app.attach(self) }
    }
}
