import FerryAppConfig
@testable import FerryClient
import FerryCore
@testable import FerryServer
import FerryStore
import FerrySyncStorage
import Foundation

/// A transaction a device's host committed, as the host knows it.
struct HostTransaction {
    let receipt: UInt64
    /// Its local version, and the client-file generation it was committed in.
    let version: UInt64
    let generation: Int
    /// The keys of its writes the server must refuse.
    let denied: Set<String>
    /// A client reset discarded it.
    var discarded = false
    /// A terminate took the error 231 of one of its refused writes.
    var refusalLost = false
}

/// A device: a real client store on in-memory SQLite, and the sync session's own protocol
/// decisions (`SessionMachine`: bind, identity, uploads of the local changesets after the last
/// one sent, integration of downloads with their acknowledgement, compensating writes and
/// receipts), whose effects this runs as `SyncSession` does, on the simulated network. A
/// second handle keeps the store alive across a crash of the first, as the file would stay on
/// disk.
final class SimDevice {
    let index: Int
    let configuration: DatabaseConfiguration
    let scheduler: PollingScheduler
    let layout: SimDoc.Layout
    private let keeper: Database
    private(set) var db: Database
    var connected = false
    /// The session's state and decisions: the real sync session's.
    private(set) var machine = SessionMachine(acknowledged: 0)
    var window: UploadWindow { machine.uploads }
    var lastUploaded: UInt64 { window.lastUploaded }
    var toServer: [ProtocolMessage] = []
    var toDevice: [ProtocolMessage] = []
    /// The keys of this device's writes the server must refuse, and of the objects whose
    /// reverts its store captured (what a sync session hands to the host with error 231).
    var deniedWrites: Set<String> = []
    var captured: Set<String> = []
    /// The refused keys whose compensating write (error 231) reached this device.
    var answered: Set<String> = []
    /// The refused keys whose reverted values the session handed over with their error 231.
    var reverted: Set<String> = []
    /// The host's waits for download (a MARK each) and for upload since the device last
    /// started, and how many completed: every one must, once the network is quiet.
    var downloadWaits = 0
    let downloadWaitsDone = LockedValue((ok: 0, failed: 0))
    var uploadWaits = 0
    let uploadWaitsDone = LockedValue((ok: 0, failed: 0))
    /// The session's progress counters and notifiers (the real ones), and what the host's
    /// notifiers (`reportIndefinitely`, both directions) were told since the device started.
    private(set) var progress = ProgressNotifiers { $0(); return true }
    let uploadReports = LockedValue([SyncProgress]())
    let downloadReports = LockedValue([SyncProgress]())
    private var progressTokens: [ProgressToken] = []
    /// Every transaction the host committed, by its write receipt, with its local version, the
    /// keys of its writes the server must refuse, and whether a client reset discarded it (the
    /// host's knowledge: kept across crashes, as the file keeps the receipts).
    var receipts: [HostTransaction] = []
    /// Refused writes whose error 231 a terminate took before it reached the device (the
    /// server forgot the file's refusals with it): counted, not failed (`refusalsLost`).
    private(set) var refusalsLost = 0
    /// The device's client-file generations: a client reset starts the next one. The oracle
    /// leaves out the writes of a generation after what the server had integrated when it
    /// forgot the file.
    private(set) var generation = 0
    /// Client resets the device finished.
    private(set) var resets = 0

    init(index: Int, name: String, schema: Schema, clock: SimClock) throws {
        self.index = index
        layout = try SimDoc.Layout(try schema.objectSchema(named: "Doc") ?? { throw FerryError(.noSuchClass, "no Doc") }())
        var c = DatabaseConfiguration(location: .memory(name), schema: schema, synced: true)
        c.clock = clock.wallClock
        configuration = c
        scheduler = try PollingScheduler()
        keeper = try Database.open(c, scheduler: scheduler)
        db = try Database.open(c, scheduler: scheduler)
        db.startReceiptSession(acknowledged: 0)
        observeProgress()
        // A subscription set (every document, as the server's view here): what a client reset
        // asks the server for.
        var set = SubscriptionSet()
        set.version = 1
        set.state = .complete
        set.subscriptions = [Subscription(name: "all", objectType: "Doc", query: "TRUEPREDICATE")]
        try set.save(db)
    }

    /// As a host that watches both directions for as long as the session lives.
    private func observeProgress() {
        progress = ProgressNotifiers { $0(); return true }
        uploadReports.withLock { $0 = [] }
        downloadReports.withLock { $0 = [] }
        let up = uploadReports, down = downloadReports
        progressTokens = [progress.register(.upload, .reportIndefinitely) { p in up.withLock { $0.append(p) } },
                          progress.register(.download, .reportIndefinitely) { p in down.withLock { $0.append(p) } }]
    }

    /// As the session counts the host's commits into the upload progress.
    func countLocalChanges() throws {
        progress.uploadable(adding: machine.committed(try db.pendingChangesetSizes(after: machine.countedThrough)))
    }

    func destroy() {
        db.close()
        keeper.close()
    }

    func connect(failure: (String) -> Error) throws {
        connected = true
        toServer = []
        toDevice = []
        machine.attached(id: SimMessage.session)
        try run(machine.connected(database: "sim-\(index)", meta: try db.syncMetadata(), replaysRefusals: true), failure: failure)
    }

    func disconnect() {
        connected = false
        machine.connectionLost()
        toServer = []
        toDevice = []
    }

    /// The host suspends the session: it leaves its connection (here, the device's own); its
    /// writes and waits are kept. False if it already was suspended.
    func suspend() -> Bool {
        guard machine.suspend() else { return false }
        disconnect()
        return true
    }

    /// The host resumes: the session may connect again.
    func resume() { _ = machine.resume() }
    var paused: Bool { machine.paused }

    /// A crash: the session's state is gone, the committed data stays.
    func restart() throws {
        db.close()
        db = try Database.open(configuration, scheduler: scheduler)
        let meta = try db.syncMetadata()
        machine = SessionMachine(acknowledged: meta.acknowledged, answered: meta.answered)
        // The host went with the process, and its waits and notifiers.
        downloadWaits = 0
        downloadWaitsDone.withLock { $0 = (0, 0) }
        uploadWaits = 0
        uploadWaitsDone.withLock { $0 = (0, 0) }
        observeProgress()
        try countLocalChanges()
        // As the sync session: settled only as far as the file has every answer.
        db.startReceiptSession(acknowledged: meta.answered)
    }

    func receive(_ message: ProtocolMessage, failure: (String) -> Error) throws {
        if case .error(let e) = message, e.code == ProtocolError.Code.compensatingWrite {
            for w in e.compensatingWrites { if case .string(let key) = w.primaryKey { answered.insert(key) } }
        }
        try run(machine.received(message), failure: failure)
    }

    /// Sends what was committed after the last upload; false when there was nothing.
    func uploadPending() throws -> Bool {
        guard connected, let from = machine.uploadFrom else { return false }
        guard let message = machine.upload(try db.pendingChangesets(after: from)) else { return false }
        toServer.append(message)
        db.noteReceiptsUploaded(through: machine.uploads.lastUploaded)
        return true
    }

    /// The host waits for download: a MARK, sent now or when the session is next ready.
    func waitForDownload(failure: (String) -> Error) throws {
        downloadWaits += 1
        let done = downloadWaitsDone
        try run(machine.mark(.download { error in done.withLock { if error == nil { $0.ok += 1 } else { $0.failed += 1 } } }), failure: failure)
    }

    /// The host waits until everything it committed so far is acknowledged.
    func waitForUpload(failure: (String) -> Error) throws {
        uploadWaits += 1
        let done = uploadWaitsDone
        try run(machine.waitForUpload(through: try db.latestLocalVersion()) { error in
            done.withLock { if error == nil { $0.ok += 1 } else { $0.failed += 1 } }
        }, failure: failure)
    }

    /// Whether uploads were acknowledged whose answers are not all in (their receipts not settled).
    var hasUnsettledReceipts: Bool { (db.receiptsSettled ?? 0) < window.acknowledged }

    /// As the session's timer does when acknowledgements pause: a MARK that settles the
    /// receipts of the uploads sent so far. False when none went out.
    func sendReceiptMark(failure: (String) -> Error) throws -> Bool {
        guard connected, hasUnsettledReceipts else { return false }
        let effects = machine.receiptMark()
        try run(effects, failure: failure)
        return !effects.isEmpty
    }

    /// Runs the machine's effects as `SyncSession.perform` does, with the store and the
    /// simulated network; what only a host sees (progress, subscriptions, MARKs) is not
    /// simulated.
    private func run(_ effects: [SessionEffect], failure: (String) -> Error) throws {
        for effect in effects {
            switch effect {
            case .send(let m):
                toServer.append(m)
            case let .storeIdentity(ident, salt):
                try db.setClientFile(ident: ident, salt: salt)
            case .ready:
                // As `SyncSession.identified`: uploads, a MARK for what an earlier connection
                // left unsettled, then the MARKs a lost connection took.
                _ = try uploadPending()
                if hasUnsettledReceipts { try run(machine.receiptMark(), failure: failure) }
                try run(machine.unsentMarks(), failure: failure)
            case .integrate(let download):
                let captures = try db.integrate(changesets: download.changesets, serverVersion: download.serverVersion,
                                                completesVersion: download.isLast, acknowledged: download.acknowledged,
                                                capturingWritesAfter: download.captureFloor, answeredThrough: download.answeredThrough)
                for c in captures { if case .string(let key) = c.primaryKey { captured.insert(key) } }
                try run(machine.integrated(download, captures: captures), failure: failure)
            case .answersComplete(let through):
                db.noteReceiptsSettled(through: min(through, window.acknowledged))
            case let .refused(writes, span):
                guard let span else { continue }
                try db.recordRejection(writes, after: span.after, through: span.through)
                db.noteReceiptsSettled(through: min(span.through, window.acknowledged))
            case .report(let error):
                for r in error.revertedObjects { if case .string(let key) = r.primaryKey { reverted.insert(key) } }
            case .fail(let error):
                throw failure("device \(index)'s session stopped: \(error.code) \(error.message)")
            case .uploadPending:
                _ = try uploadPending()
            // A client reset, in discard mode, as SyncSession+ClientReset carries it out.
            case .beginClientReset(let error):
                try run(machine.beginReset(error, mode: .discardUnsyncedChanges, failures: 0, database: "sim-\(index)"), failure: failure)
            case .startReset, .abandonReset:
                try db.clearStagedResetDownload()
            case .handOverReset(let error):
                throw failure("device \(index)'s client reset was handed to the host: \(error.message)")
            case let .resetIdentified(ident, salt):
                let set = try SubscriptionSet.load(db)
                try run(machine.resetIdentified(ident: ident, salt: salt, version: set.version, subscriptions: set.subscriptions), failure: failure)
            case let .resetDownloaded(serverVersion, subscriptionVersion, isLast, changesets):
                try db.stageResetDownload(changesets.map(\.changeset))
                try run(machine.resetStaged(changesets.count, serverVersion: serverVersion, subscriptionVersion: subscriptionVersion, isLast: isLast),
                        failure: failure)
            case .finishReset(let serverVersion):
                guard let reset = machine.takeResetToFinish() else { continue }
                let before = try db.syncMetadata().acknowledged
                _ = try db.resetToServerState(target: Database.ResetTarget(clientFileIdent: reset.ident, clientFileSalt: reset.salt, serverVersion: serverVersion),
                                              recover: reset.recover, discardReason: reset.discardReason)
                // Every unacknowledged transaction is discarded (discard mode).
                for n in receipts.indices where receipts[n].version > before && !receipts[n].discarded {
                    receipts[n].discarded = true
                    deniedWrites.subtract(receipts[n].denied)
                }
                generation += 1
                resets += 1
                try run(machine.resetApplied(acknowledged: try db.syncMetadata().acknowledged, latest: try db.latestLocalVersion(),
                                             queryVersion: reset.queryVersion), failure: failure)
                try run(machine.resetDone(), failure: failure)
            case .markAnswered(.download(let done)):
                done(nil)
            case .markAnswered(.receipts(let through)):
                db.noteReceiptsSettled(through: min(through, window.acknowledged))
            case .uploaded(let bytes):
                progress.uploaded(adding: bytes)
            case let .downloaded(d, settled):
                progress.downloaded(bytes: d.bytes, remaining: d.downloadable, settled: settled)
            case .expectDownload:
                progress.expectDownload()
            case .completeWaits(let done):
                for d in done { d(nil) }
            case .subscriptionCompleted, .storeWriteRules, .subscriptionFailed:
                break
            }
        }
    }

    /// A terminate forgot the refusals of `keys` before their error 231 reached this device: the
    /// host will never be told (a known gap, counted), and their transactions' receipts are not
    /// judged.
    func refusalsLost(_ keys: Set<String>) {
        let lost = keys.intersection(deniedWrites.subtracting(answered))
        guard !lost.isEmpty else { return }
        refusalsLost += lost.count
        deniedWrites.subtract(lost)
        for n in receipts.indices where !receipts[n].denied.isDisjoint(with: lost) { receipts[n].refusalLost = true }
    }

    /// The client file the device holds (0: none yet).
    func clientFile() throws -> UInt64 { try db.syncMetadata().clientFileIdent }

    func doc(_ key: String) throws -> SimDoc? {
        try db.object(classIndex: 0, key: .string(key)).flatMap { SimDoc(row: $0, layout) }
    }

    func allDocs() throws -> [String: SimDoc] {
        var out: [String: SimDoc] = [:]
        for row in try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []) {
            guard case .string(let key) = row[layout.key], let doc = SimDoc(row: row, layout) else { continue }
            out[key] = doc
        }
        return out
    }

    func unacknowledged() throws -> Int {
        try db.pendingChangesets(after: try db.syncMetadata().acknowledged).count
    }

    func commit(_ ops: [(String, SimOp)]) throws {
        try db.beginWrite()
        do {
            for (key, op) in ops {
                let k = FerryValue.string(key)
                switch op {
                case .create(let d):
                    try db.create(classIndex: 0, values: [(layout.key, k), (layout.owner, .string(d.owner)), (layout.title, .string(d.title)),
                                                          (layout.counter, .int(d.counter)), (layout.rank, .int(d.rank))])
                case .delete: try db.delete(classIndex: 0, key: k)
                case .title(let t): try db.set(classIndex: 0, key: k, property: layout.title, value: .string(t))
                case .rank(let r): try db.set(classIndex: 0, key: k, property: layout.rank, value: .int(r))
                case .add(let n): try db.addInteger(classIndex: 0, key: k, property: layout.counter, delta: n)
                }
            }
            let receipt = try db.commit()
            receipts.append(HostTransaction(receipt: receipt, version: try db.latestLocalVersion(), generation: generation,
                                            denied: Set(ops.compactMap { $0.0.hasPrefix("x") ? $0.0 : nil })))
            try countLocalChanges()
        } catch {
            try? db.cancel()  // the error thrown is the one that matters
            throw error
        }
    }
}
