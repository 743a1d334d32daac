import FerryCore
import FerryStore

/// The sync session of one synced database (the seeds' `SyncSession`): binds the file on its
/// user's connection, sends the subscription set, uploads local changesets, integrates
/// downloads, reports errors, completes waits, and reports its state and progress. Its state
/// lives on the loop thread; the public methods can be called from any thread; completions,
/// observers and notifiers run on the loop thread.
public final class SyncSession: @unchecked Sendable {
    public let database: Database
    public let path: String
    /// The user whose database this is.
    public let user: SyncUser
    /// Strong: a session keeps its App's machinery alive; `App.close()` stops the session.
    let app: App
    weak var connection: SyncConnection?
    /// The protocol's state and decisions, without I/O (`SessionMachine`): this type runs
    /// the effects it returns on the loop thread.
    var machine: SessionMachine
    var sessionId: UInt64? { machine.sessionId }
    /// Ready, closed, paused, in standby, failed (`SessionLifecycle`: its invariants).
    var life: SessionLifecycle {
        get { machine.life }
        _modify { yield &machine.life }
    }
    /// Bound and identified: messages may flow.
    var ready: Bool { life.ready }
    var closed: Bool { life.closed }
    var paused: Bool { life.paused }
    var standby: Bool { life.standby }
    var fatal: SyncError? { life.fatal }
    /// What was sent and what the server acknowledged (`UploadWindow`: its invariants).
    var uploads: UploadWindow { machine.uploads }
    var lastUploaded: UInt64 { uploads.lastUploaded }
    var acknowledged: UInt64 { uploads.acknowledged }
    /// The subscription set version last sent in a QUERY on this connection.
    var sentQueryVersion: UInt64 { machine.sentQueryVersion }
    /// The MARKs sent and to send, and what each answer completes (`MarkBook`).
    var marks: MarkBook {
        get { machine.marks }
        _modify { yield &machine.marks }
    }
    /// The host's waits for upload and for subscription sets (`SessionWaits`).
    var waits: SessionWaits {
        get { machine.waits }
        _modify { yield &machine.waits }
    }
    /// Waits for write receipts (SyncSession+Receipts, loop thread).
    var receiptWaiters: [ReceiptWaiter] = []
    /// MARKs sent to settle receipts (loop thread; tests read it).
    var receiptMarksSent = 0
    /// Sends a receipt MARK when acknowledgements stop coming (SyncSession+Receipts).
    var receiptTimer: LoopTimer?
    /// Retries the sync agent role while in standby (SyncSession+Standby, loop thread).
    var standbyTimer: LoopTimer?
    /// What the host chose for client resets, and the reset in progress (loop thread).
    let resetMode: ClientResetMode
    let beforeReset: (@Sendable (Database) -> Void)?
    let afterReset: (@Sendable (Database, Database, ClientResetReport) -> Void)?
    var reset: ClientResetRun? { machine.reset }
    /// The pre-flight check installed on the file's store (nil in mode off).
    let precheck: WritePrecheck?
    /// Tests only (loop thread): called after each DOWNLOAD message of a reset's fresh state is
    /// staged, with the number of changesets the run has staged so far.
    var resetStagingProbe: ((Int) -> Void)?
    let progress: ProgressNotifiers

    /// What the host's threads read, written on the loop thread (`HostView`).
    private let shared = LockedValue(HostView())

    /// The part of a session's state that any thread reads: its state and connection state,
    /// the connection state's observers, and whether an upload pass is posted to the loop.
    private struct HostView {
        var state: SessionState = .active
        var connectionState: ConnectionState = .disconnected
        var observers: [UInt64: @Sendable (ConnectionState, ConnectionState) -> Void] = [:]
        var nextObserver: UInt64 = 1
        /// A pass of `countLocalChanges` and `uploadPending` is posted to the loop: one per
        /// burst of commits.
        var uploadPassPosted = false
    }

    init(app: App, user: SyncUser, database: Database, path: String, options: SyncOpenOptions = SyncOpenOptions()) throws {
        self.app = app
        resetMode = options.clientResetMode
        beforeReset = options.beforeReset
        afterReset = options.afterReset
        precheck = options.precheckMode == .off ? nil : WritePrecheck(mode: options.precheckMode, handler: options.precheckHandler)
        self.user = user
        self.database = database
        self.path = path
        let loop = app.loop
        progress = ProgressNotifiers { loop.post($0) }
        let meta = try database.syncMetadata()
        machine = SessionMachine(acknowledged: meta.acknowledged, answered: meta.answered)
        // Settled only as far as the file has every answer: a 231 the last connection lost is
        // sent again (`RefusalLedger`), so a receipt it rejects never reads acknowledged first.
        database.startReceiptSession(acknowledged: meta.answered)
        try countLocalChanges()
        if let reason = database.otherProcessesUnwatchedReason {
            app.log(.warn, "\(path) is not watched for other processes' commits (\(reason)): other processes' writes are uploaded only when this process next commits or reconnects, and its observers do not see them")
        }
        // A reset's download left staged by a process that died mid-reset is of no use: the
        // next reset run downloads again (a read when nothing is staged).
        try? database.clearStagedResetDownload()
        if let set = try? SubscriptionSet.load(database), set.version > 0, set.state == .pending { progress.expectDownload() }
        if let precheck {
            // The last rules a server published to this file: the check works offline.
            let stored = try database.syncValue(WritePrecheck.rulesKey).flatMap { try? WriteRulesCodec.decode($0) }
            precheck.update(rules: stored)
            precheck.update(subscriptions: try SubscriptionSet.load(database).subscriptions)
            database.setCommitCheck(precheck)
        }
        // One pass on the loop per burst of commits, however many: a host committing every
        // half millisecond posted a pass per commit, and the shared loop thread fell minutes
        // behind under load (its sessions' other messages, a connection's close included,
        // waited behind them).
        database.setCommitListener(self) { [weak self] in
            guard let self, self.shared.withLock({ (view: inout HostView) -> Bool in
                if view.uploadPassPosted { return false }
                view.uploadPassPosted = true
                return true
            }) else { return }
            self.app.loop.post {
                // Cleared first: a commit during the pass posts the next one.
                self.shared.withLock { $0.uploadPassPosted = false }
                try? self.countLocalChanges()
                self.uploadPending()
            }
        }
        database.setReceiptInterestListener(self) { [weak self] in
            guard let self else { return }
            self.app.loop.post { self.receiptInterestArrived() }
        }
    }

    // MARK: state

    /// Active, paused (by `suspend()`), or inactive (closed, logged out, fatal error).
    public var state: SessionState { shared.withLock { $0.state } }

    /// The state of the connection this session syncs over; `disconnected` while paused.
    public var connectionState: ConnectionState { shared.withLock { $0.connectionState } }

    /// Calls `observer(old, new)` on the loop thread at every change of `connectionState`
    /// until the token is cancelled or released.
    public func observeConnectionState(_ observer: @escaping @Sendable (ConnectionState, ConnectionState) -> Void) -> ConnectionStateToken {
        let id = shared.withLock { view -> UInt64 in
            defer { view.nextObserver += 1 }
            view.observers[view.nextObserver] = observer
            return view.nextObserver
        }
        let loop = app.loop
        return ConnectionStateToken(post: { loop.post($0) }) { [weak self] in _ = self?.shared.withLock { $0.observers.removeValue(forKey: id) } }
    }

    /// Loop thread: the connection (or the session's leaving it) changed the state. Observers
    /// get the state this session last reported, so they see every step exactly once.
    func connectionStateChanged(from _: ConnectionState, to new: ConnectionState) {
        let (previous, observers): (ConnectionState, [@Sendable (ConnectionState, ConnectionState) -> Void]) = shared.withLock { view in
            let previous = view.connectionState
            guard previous != new else { return (previous, []) }
            view.connectionState = new
            return (previous, view.observers.sorted { $0.key < $1.key }.map(\.value))
        }
        for o in observers { o(previous, new) }
    }

    private func setState(_ s: SessionState) { shared.withLock { $0.state = s } }

    /// Pauses syncing in both directions (SPEC F-SUSPEND): the session leaves its connection
    /// (closed when no other session uses it); local writes are kept and uploaded after
    /// `resume()`; waits stay pending until then. Other sessions are not affected.
    public func suspend() {
        // The state reads `paused` as soon as this returns; the loop thread does the rest.
        shared.withLock { if $0.state == .active { $0.state = .paused } }
        app.loop.post { [self] in
            guard machine.suspend() else { return }
            app.pausedSessions[ObjectIdentifier(self)] = self
            let c = connection
            connection = nil
            connectionEnded(fatal: nil)
            c?.remove(self)
            connectionStateChanged(from: connectionState, to: .disconnected)
        }
    }

    /// Resumes a suspended session: it connects (or joins its user's connection) and catches
    /// up both ways. Does nothing unless paused.
    public func resume() {
        shared.withLock { if $0.state == .paused { $0.state = .active } }
        app.loop.post { [self] in
            guard machine.resume() else { return }
            app.pausedSessions[ObjectIdentifier(self)] = nil
            // In standby the session connects when it gets the sync agent role.
            if !standby { app.attach(self) }
        }
    }

    /// Writes a copy of this database, with its data and subscriptions, to a new file that
    /// another user's synced open can use (SPEC F-COPY); see `Database.writeSyncedCopy`.
    /// Local changes must be uploaded first (wait for upload). Any thread.
    public func writeCopy(toPath path: String) throws {
        try database.writeSyncedCopy(toPath: path)
    }

    // MARK: progress

    /// Registers a progress notifier (SPEC F-PROGRESS); it runs on the loop thread until the
    /// token is cancelled or released, or, for `.forCurrentlyOutstandingWork`, until it has
    /// reported completion (1.0). The first report comes right after registration.
    public func addProgressNotifier(direction: ProgressDirection, mode: ProgressMode,
                                    _ callback: @escaping @Sendable (SyncProgress) -> Void) -> ProgressToken {
        progress.register(direction, mode, callback)
    }

    /// Counts committed local changesets not counted yet into the upload progress.
    func countLocalChanges() throws {
        let sizes = try database.pendingChangesetSizes(after: machine.countedThrough)
        guard !sizes.isEmpty else { return }
        progress.uploadable(adding: machine.committed(sizes))
    }

    // MARK: the host's API

    /// The write rules a server last published to this file (SPEC F-PRECHECK): per class, the
    /// role that applies to the user (`%%user` values expanded) and the queryable fields; nil
    /// until a server that publishes them was connected once. Any thread.
    public func writeRules() throws -> WriteRules? {
        try database.syncValue(WritePrecheck.rulesKey).flatMap { try? WriteRulesCodec.decode($0) }
    }

    /// Calls `done` once every local change committed before this call is acknowledged by the
    /// server (durable there), or with the error that stopped the session.
    public func waitForUpload(_ done: @escaping @Sendable (FerryError?) -> Void) {
        let target: UInt64
        do { target = try database.latestLocalVersion() } catch {
            let e = error as? FerryError ?? FerryError(.internal, "\(error)")
            app.loop.post { done(e) }
            return
        }
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            if closed { return done(FerryError(.closed, "the sync session is closed")) }
            run(machine.waitForUpload(through: target, done))
        }
    }

    /// Calls `done` once everything the server had when this call reached it is downloaded
    /// and integrated, or with the error that stopped the session.
    public func waitForDownload(_ done: @escaping @Sendable (FerryError?) -> Void) {
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            if closed { return done(FerryError(.closed, "the sync session is closed")) }
            sendMark(.download(done))
        }
    }

    /// Stops syncing this database (pending waits complete with an error) and closes the handle
    /// the session owns.
    public func close() {
        database.setCommitListener(self, nil)
        database.setReceiptInterestListener(self, nil)
        if precheck != nil { database.setCommitCheck(nil) }
        let done = LoopSemaphore()
        app.loop.post { [self] in
            _ = life.close()
            receiptTimer?.invalidate()
            receiptTimer = nil
            standbyTimer?.invalidate()
            standbyTimer = nil
            setState(.inactive)
            app.pausedSessions[ObjectIdentifier(self)] = nil
            failWaiters(FerryError(.closed, "the sync session was closed"))
            abandonClientReset()
            let c = connection
            connection = nil
            c?.remove(self)
            done.signal()
        }
        if !app.loop.isCurrent { done.wait() }
        database.close()
        database.scheduler.shutdown()
    }

    // MARK: the connection's side (loop thread)

    func attach(_ c: SyncConnection, id: UInt64) {
        connection = c
        machine.attached(id: id)
    }

    /// The connection is open: bind, then (once identified) query and upload.
    func activate() {
        guard life.wantsConnection, sessionId != nil else { return }
        let meta: SyncMetadata
        do { meta = try database.syncMetadata() } catch {
            return fail(SyncError(code: ProtocolError.Code.local, message: "cannot read the sync state of \(path): \(error)", isFatal: true, action: .applicationBug))
        }
        run(machine.connected(database: path, meta: meta, replaysRefusals: connection?.serverReplaysRefusals == true))
    }

    /// Bound and identified: the subscription set, the pending uploads, and the MARKs.
    private func identified(knownFile: Bool) {
        sendQuery(bound: knownFile)
        uploadPending()
        // Settles what an earlier connection left acknowledged but unanswered (nothing, as a
        // rule: a session without receipts to settle sends no MARK).
        if hasUnsettledReceipts, database.receiptsWanted { sendReceiptMark() }
        sendUnsentMarks()
    }

    /// Sends a MARK whose answer completes `wait` (when the session is next ready, if not now).
    func sendMark(_ wait: MarkBook.Wait) { run(machine.mark(wait)) }

    /// The session is ready again: the MARKs a lost connection took go out, in order.
    func sendUnsentMarks() { run(machine.unsentMarks()) }

    /// Runs what a MARK's answer (or the session's end, `error`) completes.
    private func complete(_ wait: MarkBook.Wait, _ error: FerryError?) {
        switch wait {
        case .download(let done):
            done(error)
        case .receipts(let target):
            guard error == nil else { return }
            settleReceipts(through: target)
            if hasUnsettledReceipts { scheduleReceiptMark() }
        }
    }

    /// Sends a MARK that settles the receipts of the uploads sent so far
    /// (`SessionMachine.receiptMark`). Most receipts settle without one (see
    /// `acknowledgementMoved`); this is for the last upload of a burst. A MARK lost with its
    /// connection is sent again on the next one, after the uploads.
    func sendReceiptMark() {
        let effects = machine.receiptMark()
        guard !effects.isEmpty else { return }
        receiptMarksSent += 1
        run(effects)
    }

    /// The connection closed (`fatal` nil: it will reconnect).
    func connectionEnded(fatal error: SyncError?) {
        // The captures stay, the MARKs sent are sent again (`SessionMachine.connectionLost`).
        machine.connectionLost()
        // A reset in progress starts over: the file still has its old identity, which the
        // server refuses again on the next bind.
        abandonClientReset()
        if let error { fail(error) }
    }

    /// Upload messages carry about this many changeset bytes (at least one changeset): each is
    /// acknowledged on its own, so the upload progress moves in steps of this size.
    static let uploadMessageBytes = 256 << 10

    func uploadPending() {
        let before = lastUploaded
        while let from = machine.uploadFrom {
            let pending: [PendingChangeset]
            do { pending = try database.pendingChangesets(after: from, maxBytes: Self.uploadMessageBytes) } catch {
                // Not a silent stop: the host learns that its writes are not being uploaded
                // (they stay in the file, and go up once it opens again).
                return fail(SyncError(code: ProtocolError.Code.local, message: "cannot read the local changes of \(path) to upload: \(error)", isFatal: true, action: .applicationBug))
            }
            guard let message = machine.upload(pending) else { break }
            connection?.send(message)
        }
        guard lastUploaded > before else { return }
        database.noteReceiptsUploaded(through: lastUploaded)
        checkReceiptWaiters()
    }

    func handle(_ message: ProtocolMessage) {
        run(machine.received(message))
    }

    /// Runs the machine's effects in order; one that fails the session drops the rest.
    func run(_ effects: [SessionEffect]) {
        for effect in effects {
            guard perform(effect) else { return }
        }
    }

    /// Runs one effect; false when it stopped the session.
    private func perform(_ effect: SessionEffect) -> Bool {
        switch effect {
        case .send(let message):
            connection?.send(message)
        case let .storeIdentity(ident, salt):
            do { try database.setClientFile(ident: ident, salt: salt) } catch {
                fail(SyncError(code: ProtocolError.Code.local, message: "cannot store the client file identity: \(error)", isFatal: true, action: .applicationBug))
                return false
            }
        case .ready(let knownFile):
            identified(knownFile: knownFile)
        case .integrate(let download):
            let captures: [RevertCapture]
            do {
                captures = try database.integrate(changesets: download.changesets, serverVersion: download.serverVersion,
                                                  completesVersion: download.isLast, acknowledged: download.acknowledged,
                                                  capturingWritesAfter: download.captureFloor, answeredThrough: download.answeredThrough)
            } catch {
                fail(SessionMachine.integrationFailed(error, database: path))
                return false
            }
            run(machine.integrated(download, captures: captures))
        case .answersComplete(let through):
            settleReceipts(through: through)
            if hasUnsettledReceipts { scheduleReceiptMark() }
        case .uploaded(let bytes):
            progress.uploaded(adding: bytes)
        case .completeWaits(let done):
            for d in done { d(nil) }
        case .subscriptionCompleted(let version):
            subscriptionCompleted(version)
        case let .downloaded(download, settled):
            progress.downloaded(bytes: download.bytes, remaining: download.downloadable, settled: settled)
        case .expectDownload:
            progress.expectDownload()
        case .markAnswered(let wait):
            complete(wait, nil)
        case .storeWriteRules(let rules):
            // Kept in the file even in mode off: a later open with a check has them offline.
            do { try database.setSyncValue(WritePrecheck.rulesKey, WriteRulesCodec.encode(rules)) } catch {
                app.log(.warn, "cannot store the write rules of \(path): \(error)")
            }
            precheck?.update(rules: rules)
        case let .refused(writes, span):
            app.log(.error, SyncErrorText.compensatingWriteLogLine(connection: 1, session: Int(sessionId ?? 1)))
            rejectReceipts(writes, answering: span)
        case .subscriptionFailed(let message):
            subscriptionFailed(message)
        case .report(let error):
            app.report(error, session: self)
        case .fail(let error):
            fail(error)
            return false
        case .uploadPending:
            uploadPending()
        case .beginClientReset(let error):
            beginClientReset(error)
        case .startReset(let run):
            guard startClientReset(run) else { return false }
        case .handOverReset(let error):
            handOver(error)
        case let .resetIdentified(ident, salt):
            resetIdentified(ident: ident, salt: salt)
        case let .resetDownloaded(serverVersion, subscriptionVersion, isLast, changesets):
            resetDownloaded(serverVersion: serverVersion, subscriptionVersion: subscriptionVersion, isLast: isLast, changesets: changesets)
        case .finishReset(let serverVersion):
            finishClientReset(serverVersion: serverVersion)
        case .abandonReset:
            clearAbandonedReset()
        }
        return !closed && fatal == nil
    }

    func checkUploadWaiters() { run(machine.uploadWaitsDone()) }

    private func failWaiters(_ e: FerryError) {
        let marked = marks.takeAll()
        let uploads = waits.takeUploads(), subs = waits.takeSubscriptions()
        let receipts = receiptWaiters; receiptWaiters.removeAll()
        for m in marked { complete(m, e) }
        for u in uploads { u(e) }
        for s in subs { s(e) }
        for r in receipts { r.done(.failure(e)) }
    }

    /// A fatal error: the session stops syncing for good (it leaves its connection, so
    /// `App.reconnect()` has nothing to do for it), reports, and fails its waits.
    func fail(_ error: SyncError) {
        guard life.fail(error) else { return }
        receiptTimer?.invalidate()
        receiptTimer = nil
        standbyTimer?.invalidate()
        standbyTimer = nil
        setState(.inactive)
        let c = connection
        connection = nil
        c?.remove(self)
        connectionStateChanged(from: connectionState, to: .disconnected)
        app.report(error, session: self)
        failWaiters(error.asFerryError)
    }
}
