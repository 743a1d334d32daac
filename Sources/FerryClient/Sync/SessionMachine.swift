import FerryCore
import FerryStore

/// The sync protocol of one session as a state machine without I/O (issue 25: deciding apart
/// from doing). It holds what the protocol needs to remember (where the session is in its
/// life, what was uploaded and acknowledged, the reverts downloads captured, the MARKs and the
/// host's waits, the upload progress's count, the set sent, the client reset in progress) and
/// turns events (connected, a message received, a download integrated, the connection lost, a
/// MARK or wait wanted, the set to send, suspend and resume, a reset's steps) into effects
/// (`SessionEffect`: send, store, integrate, settle, complete, report), in the order they must
/// run. It reads no file and sends nothing: `SyncSession` runs its
/// effects on the libuv loop, the deterministic simulation (Tests/FerrySimulationTests) runs
/// them on its simulated network, and `SessionMachineTests` checks each rule on its own.
///
/// Invariants (besides those of `SessionLifecycle` and `UploadWindow`):
/// - uploads, queries and MARKs go out only while `life.ready` (bound and identified);
/// - while a client reset runs (`reset`), IDENT and DOWNLOAD belong to it, not to the file's
///   old identity, and an error "session not bound" answers a message sent before it: stale;
/// - a compensating write (error 231) claims the captures of the objects it names and
///   completes the answer to the last acknowledged upload (`UploadWindow.lastAcknowledgement`).
package struct SessionMachine {
    /// Ready, closed, paused, in standby, failed.
    var life = SessionLifecycle()
    /// What was sent and what the server acknowledged.
    package private(set) var uploads: UploadWindow
    /// Objects that downloads changed under the device's recent writes, until an error 231
    /// names them.
    private var revertCaptures = RevertCaptures()
    /// The client reset in progress (its decisions: `ClientResetRun`).
    var reset: ClientResetRun?
    /// The session's number on its connection.
    package private(set) var sessionId: UInt64?
    /// The MARKs sent and to send, and what each answer completes (`MarkBook`).
    var marks = MarkBook()
    /// The host's waits for upload and for subscription sets (`SessionWaits`).
    var waits = SessionWaits()
    /// The upload progress's count of the local changesets not acknowledged yet.
    private var progressCount: UploadProgressCount
    /// The subscription set version last sent in a QUERY on this connection (0: none yet).
    package private(set) var sentQueryVersion: UInt64 = 0

    /// A session opening a file whose stored acknowledgement is `acknowledged`, with every
    /// answer through `answered` (`SyncMetadata`).
    package init(acknowledged: UInt64, answered: UInt64? = nil) {
        uploads = UploadWindow(acknowledged: acknowledged, answered: answered)
        progressCount = UploadProgressCount(countedThrough: acknowledged)
    }

    package var ready: Bool { life.ready }

    // MARK: events

    /// The session joined a connection under `id`.
    package mutating func attached(id: UInt64) { sessionId = id }

    /// The connection is open, and the file's sync state reads `meta`: bind, and for a file
    /// the server already knows, start at once (the server takes messages right behind a
    /// BIND). `replaysRefusals`: the server sends again the refusals after `answeredThrough`.
    package mutating func connected(database path: String, meta: SyncMetadata, replaysRefusals: Bool) -> [SessionEffect] {
        guard life.wantsConnection, let id = sessionId else { return [] }
        life.notReady()
        uploads.connected(stored: meta.acknowledged, answered: meta.answered)
        let known = meta.clientFileIdent != 0
        // The refusals after `answered` are sent again by a server that keeps them (a lost
        // connection may have taken their ERROR 231: SPEC F-NOLOSS).
        let answered = replaysRefusals && known ? meta.answered : nil
        var effects: [SessionEffect] = [.send(.bind(session: id, database: path, clientFileIdent: meta.clientFileIdent,
                                                     clientFileSalt: meta.clientFileSalt, lastServerVersion: meta.serverVersion,
                                                     answeredThrough: answered))]
        if known { effects += becameReady(knownFile: true) }
        return effects
    }

    /// The connection closed: nothing flows until the next `connected`. The captures stay: a
    /// revert's error lost with the connection is sent again at the next BIND
    /// (`RefusalLedger`) and claims them then. The MARKs sent on it are sent again on the
    /// next one (answers to the old ones complete nothing).
    package mutating func connectionLost() {
        life.notReady()
        marks.requeue()
    }

    /// The host suspended the session (SPEC F-SUSPEND): it leaves its connection, and nothing
    /// flows until `resume`; local writes and waits are kept. False if it was not live or
    /// already paused (nothing to do).
    package mutating func suspend() -> Bool {
        guard life.pause() else { return false }
        connectionLost()
        return true
    }

    /// The host resumed a suspended session: it may connect again. False if it was not paused.
    package mutating func resume() -> Bool { life.resume() }

    /// Suspended by the host.
    package var paused: Bool { life.paused }

    /// A MARK whose answer completes `wait`: sent now if the session is ready, else when it
    /// next is (`unsentMarks`).
    package mutating func mark(_ wait: MarkBook.Wait) -> [SessionEffect] {
        guard life.ready, let id = sessionId else {
            marks.postpone(wait)
            return []
        }
        return [.send(.mark(session: id, request: marks.issue(wait)))]
    }

    /// A MARK after the uploads sent so far: the server handles a connection's messages in
    /// order, so its answer comes after every one of those uploads' answers (231s included),
    /// and their receipts settle. One is out at a time; none while the session is not ready.
    package mutating func receiptMark() -> [SessionEffect] {
        guard life.ready, !marks.receiptMarkOut, sessionId != nil else { return [] }
        return mark(.receipts(through: uploads.lastUploaded))
    }

    /// The session is ready again: the MARKs a lost connection took, in order.
    package mutating func unsentMarks() -> [SessionEffect] {
        marks.takeUnsent().flatMap { mark($0) }
    }

    /// A message from the server for this session.
    package mutating func received(_ message: ProtocolMessage) -> [SessionEffect] {
        guard !life.closed else { return [] }
        switch message {
        case let .ident(_, ident, salt) where reset != nil:
            return [.resetIdentified(ident: ident, salt: salt)]
        case let .download(_, serverVersion, _, subscriptionVersion, _, isLast, changesets) where reset != nil:
            // Checked before any of it is staged: a malformed fresh state ends the run (the
            // decode's error is not needed: that it fails is the answer).
            for c in changesets where (try? ChangesetCodec.decode(c.changeset)) == nil {
                reset = nil
                return [.abandonReset, .fail(SyncError(code: ProtocolError.Code.badChangeset, message: "the server sent a malformed changeset",
                                                       isFatal: true, action: .protocolViolation))]
            }
            return [.resetDownloaded(serverVersion: serverVersion, subscriptionVersion: subscriptionVersion, isLast: isLast, changesets: changesets)]
        case .error(let e) where e.action == .clientReset || e.action == .clientResetNoRecovery:
            return [.beginClientReset(SyncError(code: e.code, message: e.message, isFatal: true, action: e.action))]
        case .error(let e) where e.code == ProtocolError.Code.sessionNotBound && reset != nil:
            return []
        case let .ident(_, ident, salt):
            return [.storeIdentity(ident: ident, salt: salt)] + becameReady(knownFile: false)
        case let .download(_, serverVersion, ack, subscriptionVersion, downloadable, isLast, changesets):
            return [.integrate(DownloadIntegration(
                changesets: changesets.map(\.changeset), serverVersion: serverVersion, acknowledged: ack,
                subscriptionVersion: subscriptionVersion, downloadable: downloadable, isLast: isLast,
                // A download that moves the acknowledgement answers an upload whose writes are
                // after the previous one; one that does not may still carry that answer's reverts.
                captureFloor: uploads.captureFloor(for: ack), answeredThrough: uploads.answersComplete(for: ack)))]
        case let .mark(_, request):
            // An answer to a MARK requeued since (or unknown) completes nothing.
            return marks.answered(request).map { [.markAnswered($0)] } ?? []
        case let .writeRules(_, rules):
            return [.storeWriteRules(rules)]
        case .error(let e):
            return errorReceived(e)
        default:
            return []
        }
    }

    /// The store integrated `download` and captured `captures` (objects it changed under the
    /// device's recent writes): what follows from its acknowledgement and its batch.
    package mutating func integrated(_ download: DownloadIntegration, captures: [RevertCapture]) -> [SessionEffect] {
        revertCaptures.add(captures)
        var effects: [SessionEffect] = []
        if let complete = uploads.acknowledge(download.acknowledged) { effects.append(.answersComplete(through: min(complete, uploads.acknowledged))) }
        effects.append(.uploaded(bytes: acknowledgedBytes()))
        if download.isLast { effects.append(.subscriptionCompleted(download.subscriptionVersion)) }
        // Settled: nothing more is expected (the last of its batch, no newer set asked for).
        effects.append(.downloaded(download, settled: download.isLast && download.subscriptionVersion >= sentQueryVersion))
        return effects + uploadWaitsDone()
    }

    /// Bound and identified: nothing of the set was sent on this connection yet.
    private mutating func becameReady(knownFile: Bool) -> [SessionEffect] {
        guard life.becameReady() else { return [] }
        sentQueryVersion = 0
        return [.ready(knownFile: knownFile)]
    }

    // MARK: the subscription set (SPEC F-SUBS)

    /// Whether the stored set of `version` (0: none) is to be sent now: the session is ready
    /// and has not sent it on this connection.
    package func wantsQuery(version: UInt64) -> Bool {
        life.ready && sessionId != nil && version > 0 && version != sentQueryVersion
    }

    /// Whether the set the file's data reflects must be named first: the first QUERY after
    /// binding a known file (`bound`), of a set not complete (`pending`). The server may have
    /// recorded that set as what the data reflects when it queued its bootstrap, which this
    /// file never integrated (the connection dropped first); naming first the set the data does
    /// reflect makes the server's view match the file, so the pending set's bootstrap sends
    /// everything that enters it.
    package static func namesReflectedFirst(bound: Bool, pending: Bool) -> Bool { bound && pending }

    /// The QUERY messages for the stored set (`version`, `subscriptions`), after the set the
    /// data reflects (`reflected`, read when `namesReflectedFirst` said so) if that is older.
    package mutating func query(version: UInt64, subscriptions: [Subscription],
                                reflected: (version: UInt64, subscriptions: [Subscription])?) -> [SessionEffect] {
        guard wantsQuery(version: version), let id = sessionId else { return [] }
        var effects: [SessionEffect] = []
        if let reflected, reflected.version < version {
            effects.append(.send(.query(session: id, version: reflected.version, subscriptions: reflected.subscriptions)))
        }
        sentQueryVersion = version
        return effects + [.expectDownload, .send(.query(session: id, version: version, subscriptions: subscriptions))]
    }

    /// The host waits until every local change through `target` is acknowledged (at once if
    /// it is).
    package mutating func waitForUpload(through target: UInt64, _ done: @escaping SessionWaits.Done) -> [SessionEffect] {
        waits.waitForUpload(through: target, done)
        return uploadWaitsDone()
    }

    /// The upload waits the acknowledgement completes.
    mutating func uploadWaitsDone() -> [SessionEffect] {
        let done = waits.uploadsDone(acknowledged: uploads.acknowledged)
        return done.isEmpty ? [] : [.completeWaits(done)]
    }

    /// The version after which committed changesets are not counted into the upload progress.
    package var countedThrough: UInt64 { progressCount.countedThrough }

    /// Committed changesets read after `countedThrough` (version and size, in order): the bytes
    /// they add to the upload progress.
    package mutating func committed(_ sizes: [(version: UInt64, bytes: UInt64)]) -> UInt64 { progressCount.count(sizes) }

    /// The bytes of counted changesets the acknowledgement now covers (each counted once).
    mutating func acknowledgedBytes() -> UInt64 { progressCount.acknowledged(through: uploads.acknowledged) }

    /// The store could not integrate a download: the fatal error the session stops with.
    package static func integrationFailed(_ error: Error, database path: String) -> SyncError {
        if error is MalformedDownload {
            return SyncError(code: ProtocolError.Code.badChangeset, message: "the server sent a malformed changeset", isFatal: true, action: .protocolViolation)
        }
        return SyncError(code: ProtocolError.Code.local, message: "cannot integrate a download into \(path): \(error)", isFatal: true, action: .applicationBug)
    }

    /// The version after which local changesets wait to be uploaded; nil when the session may
    /// not upload (not ready, closed).
    package var uploadFrom: UInt64? {
        life.ready && !life.closed && sessionId != nil ? uploads.lastUploaded : nil
    }

    /// The UPLOAD message for `pending` (read after `uploadFrom`), marking them sent; nil
    /// when there is nothing to send or the session may not.
    package mutating func upload(_ pending: [PendingChangeset]) -> ProtocolMessage? {
        guard let last = pending.last, let id = sessionId, uploadFrom != nil else { return nil }
        uploads.sent(through: last.version)
        return .upload(session: id, changesets: pending.map {
            UploadChangeset(clientVersion: $0.version, lastIntegratedServerVersion: $0.base, changeset: $0.bytes)
        })
    }

    // MARK: client reset (SPEC F-RESET): the protocol's steps; the store's work is the shell's

    /// The server refused the file's identity with `error`: a reset run as the file's `mode`
    /// says (given the failed runs the file counts), which binds the file again as a new
    /// client file once the shell has started it (`.startReset`: it clears what an earlier run
    /// staged); or the error to hand to the host (`.handOverReset`).
    package mutating func beginReset(_ error: SyncError, mode: ClientResetMode, failures: UInt64, database path: String) -> [SessionEffect] {
        guard life.isLive, let id = sessionId else { return [] }
        let run: ClientResetRun
        do { run = try ClientResetRun.start(error, mode: mode, failures: failures) } catch { return [.handOverReset(error)] }
        life.notReady()
        // Marks the server answers for the refused identity must complete nothing.
        marks.requeue()
        reset = run
        return [.startReset(run), .send(.bind(session: id, database: path, clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0))]
    }

    /// The reset's file got its identity, and the file's subscription set reads `version`
    /// (0: none) and `subscriptions`: ask for the set's data, or finish at once (an empty view).
    package mutating func resetIdentified(ident: UInt64, salt: UInt64, version: UInt64, subscriptions: [Subscription]) -> [SessionEffect] {
        guard var run = reset, let id = sessionId else { return [] }
        let step = run.identified(ident: ident, salt: salt, subscriptionVersion: version)
        reset = run
        switch step {
        case .query(let v): return [.send(.query(session: id, version: v, subscriptions: subscriptions))]
        case .finish(let serverVersion): return [.finishReset(serverVersion: serverVersion)]
        case .wait: return []
        }
    }

    /// One DOWNLOAD message of the fresh state (`count` changesets) was staged in the file.
    package mutating func resetStaged(_ count: Int, serverVersion: UInt64, subscriptionVersion: UInt64, isLast: Bool) -> [SessionEffect] {
        guard var run = reset else { return [] }
        let step = run.staged(count, serverVersion: serverVersion, subscriptionVersion: subscriptionVersion, isLast: isLast)
        reset = run
        guard case .finish(let v) = step else { return [] }
        return [.finishReset(serverVersion: v)]
    }

    /// The run ends without a result (the connection was lost, the session closed, a step
    /// failed): the shell clears what it staged. False if none was running.
    package mutating func abandonReset() -> Bool {
        guard reset != nil else { return false }
        reset = nil
        return true
    }

    /// The run the shell finishes (taken: the session is out of the reset from here on).
    package mutating func takeResetToFinish() -> ClientResetRun? {
        defer { reset = nil }
        return reset
    }

    /// The store became the fresh state: its history starts at `acknowledged` (all of it
    /// acknowledged), and its last local version is `latest` (after it, the recovered changes,
    /// as one changeset). The progress and the set's data follow; upload waits for the
    /// changes the reset settled now wait for the recovered changeset, if any.
    package mutating func resetApplied(acknowledged: UInt64, latest: UInt64, queryVersion: UInt64) -> [SessionEffect] {
        uploads.reset(to: acknowledged)
        waits.resetSettled(acknowledged: acknowledged, latest: latest)
        return [.uploaded(bytes: acknowledgedBytes()), .subscriptionCompleted(queryVersion)]
    }

    /// The reset is reported: sync on as the new client file (the recovered changes, the
    /// MARKs the reset held back, the waits it settled).
    package mutating func resetDone() -> [SessionEffect] {
        (life.becameReady() ? [.uploadPending] + unsentMarks() : []) + uploadWaitsDone()
    }

    // MARK: what the shell changes directly

    /// Another process's acknowledgement, read when this one becomes the sync agent.
    mutating func adopt(acknowledged stored: UInt64) { uploads.adopt(stored: stored) }

    // MARK: rules

    private mutating func errorReceived(_ e: ProtocolError) -> [SessionEffect] {
        var error = SyncError(code: e.code, message: e.message, isFatal: !e.tryAgain && e.action != .warning, action: e.action,
                              compensatingWrites: e.compensatingWrites)
        var effects: [SessionEffect] = []
        if e.code == ProtocolError.Code.compensatingWrite {
            error.revertedObjects = revertCaptures.claim(e.compensatingWrites)
            // It completes the answer to the upload acknowledged last (SyncSession+Receipts).
            let span = uploads.lastAcknowledgement
            if span != nil { uploads.refusalArrived() }
            effects.append(.refused(e.compensatingWrites, answering: span))
        }
        if e.code == ProtocolError.Code.badQuery { effects.append(.subscriptionFailed(e.message)) }
        effects.append(error.isFatal ? .fail(error) : .report(error))
        return effects
    }
}

/// A download for the store to integrate (`Database.integrate(changesets:...)`), with what
/// the session decided about it: where the store captures the device's writes for a revert,
/// and through which version the file then has every answer.
package struct DownloadIntegration: Sendable, Equatable {
    package let changesets: [[UInt8]]
    package let serverVersion: UInt64
    package let acknowledged: UInt64
    package let subscriptionVersion: UInt64
    /// What the server has left to send (progress).
    package let downloadable: UInt64
    /// Ends a bootstrap or a catch-up.
    package let isLast: Bool
    package let captureFloor: UInt64
    package let answeredThrough: UInt64?

    package var bytes: UInt64 { UInt64(changesets.reduce(0) { $0 + $1.count }) }
}

/// What a session does next, in order; the machine never does it itself. An effect that fails
/// stops the session with a fatal error, and the effects after it are dropped.
package enum SessionEffect {
    case send(ProtocolMessage)
    /// Store the client file identity the server gave.
    case storeIdentity(ident: UInt64, salt: UInt64)
    /// Bound and identified: send the subscription set, the pending uploads and the MARKs
    /// a lost connection took. `knownFile`: the server knew the file (not a new identity).
    case ready(knownFile: Bool)
    /// Integrate a download, then tell the machine (`integrated`).
    case integrate(DownloadIntegration)
    /// The answers to uploads through this version are complete: their receipts settle.
    case answersComplete(through: UInt64)
    /// The server acknowledged this many more bytes of counted local changesets (progress).
    case uploaded(bytes: UInt64)
    /// The host's waits these complete (without an error).
    case completeWaits([SessionWaits.Done])
    /// A download ended a batch of this subscription set version (0: none).
    case subscriptionCompleted(UInt64)
    /// A download was integrated (progress); `settled`: nothing more is expected.
    case downloaded(DownloadIntegration, settled: Bool)
    /// A set was asked for: the download progress waits for the server's figures.
    case expectDownload
    /// A MARK's answer came: complete what it waited for.
    case markAnswered(MarkBook.Wait)
    case storeWriteRules(WriteRules)
    /// An error 231: record the rejected writes against the upload span it answers (nil: no
    /// upload was acknowledged on this file), which completes that answer.
    case refused([CompensatingWrite], answering: UploadWindow.Span?)
    /// The server refused the subscription set.
    case subscriptionFailed(String)
    /// A non-fatal error for the host's error handler.
    case report(SyncError)
    /// A fatal error: the session stops for good.
    case fail(SyncError)
    /// Send what was committed and not uploaded yet.
    case uploadPending
    /// The server refused the file's identity: read what the reset needs (the failed runs the
    /// file counts), then `beginReset` (SyncSession+ClientReset).
    case beginClientReset(SyncError)
    /// A reset run starts: clear what an earlier run staged.
    case startReset(ClientResetRun)
    /// Leave the reset to the host (SPEC F-RESETMANUAL).
    case handOverReset(SyncError)
    /// The reset's file has its identity: read the subscription set, then `resetIdentified`.
    case resetIdentified(ident: UInt64, salt: UInt64)
    /// Stage a message of the fresh state, then `resetStaged`.
    case resetDownloaded(serverVersion: UInt64, subscriptionVersion: UInt64, isLast: Bool, changesets: [DownloadChangeset])
    /// The fresh state is all staged: the store becomes it (`takeResetToFinish`, then
    /// `resetApplied` and `resetDone`).
    case finishReset(serverVersion: UInt64)
    /// The run was given up: clear what it staged.
    case abandonReset
}
