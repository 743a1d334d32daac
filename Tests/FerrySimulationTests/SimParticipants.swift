import FerryAppConfig
@testable import FerryClient
import FerryCore
@testable import FerryServer
import FerryStore
import FerrySyncStorage
import Foundation

/// The messages of the simulated network are the protocol's own (`ProtocolMessage`): the
/// devices' sessions speak them through the real `SessionMachine`. Traces name them briefly.
enum SimMessage {
    static let session: UInt64 = 1

    static func describe(_ m: ProtocolMessage) -> String {
        switch m {
        case let .bind(_, _, i, _, v, a): return "BIND(file \(i), server version \(v), answered through \(a.map(String.init) ?? "-"))"
        case .upload(_, let c): return "UPLOAD(local versions \(c.first?.clientVersion ?? 0)...\(c.last?.clientVersion ?? 0))"
        case let .ident(_, i, _): return "IDENT(file \(i))"
        case let .download(_, v, a, _, _, _, c):
            return "DOWNLOAD(server version \(v), acknowledged \(a), \(c.reduce(0) { $0 + $1.changeset.count }) bytes)"
        case .error(let e): return "ERROR \(e.code)(\(e.compensatingWrites.map { "\($0.primaryKey)" }))"
        case .mark(_, let r): return "MARK(\(r))"
        case let .query(_, v, _): return "QUERY(version \(v))"
        default: return "\(m)"
        }
    }
}

/// The server side: the real merge and validation of uploads (`UploadIntegration`) over the
/// stored states, versions assigned one commit at a time, and what each session is sent: from
/// the version it has to the head, every object changed in between as it now is (or its
/// erase), and to an uploader also every object its upload named, with its acknowledgement.
/// A commit is durable when it is made (a crash loses only what was in flight).
struct SimServer {
    let app: AppConfiguration
    let schema: Schema
    let os: ObjectSchema
    let clock: SimClock
    let user = UserContext(id: "alice")
    let view: SessionView
    let layout: SimDoc.Layout
    var objects: [ObjectKey: StoredObject] = [:]
    var head: UInt64 = 0
    /// The keys each version changed.
    var changes: [(version: UInt64, keys: [ObjectKey])] = []
    var files: [UInt64: (salt: UInt64, acknowledged: UInt64)] = [:]
    /// Each client file's refusals, kept to send again (the real stores keep them so).
    var refusals: [UInt64: RefusalLedger] = [:]
    /// Whether a BIND sends again the refusals the device has no answer for (as the real server
    /// does); off only to show the gap the pinned seeds prove (`SimulationTests`).
    var replaysRefusals = true
    /// Sessions whose last BIND the server refused (a forgotten file): what they sent behind it
    /// is dropped (the real server answers with ERROR 203, which a resetting session ignores).
    var refusedBinds: Set<Int> = []
    /// How often the admin terminated and enabled sync, and how many BINDs were told to reset.
    var terminations = 0
    var resetsAsked = 0
    /// Compensating writes sent with an upload's answer, and sent again at a BIND.
    var refusalsSent = 0
    var refusalsRepeated = 0
    var nextFile: UInt64 = 1
    /// Per connected device: the client file it bound (0: not yet) and the version it has.
    var sessions: [Int: (file: UInt64, delivered: UInt64)] = [:]
    /// The keys of the writes the server refused and reported (compensating writes).
    var reported: Set<String> = []

    init(app: AppConfiguration, clock: SimClock) throws {
        self.app = app
        schema = try app.schema
        os = try schema.objectSchema(named: "Doc") ?? { throw FerryError(.noSuchClass, "the convergence app has no Doc") }()
        self.clock = clock
        layout = try SimDoc.Layout(os)
        view = try SessionView.make([Subscription(name: "all", objectType: "Doc", query: "TRUEPREDICATE")], user: user, app: app, schema: schema).get()
    }

    /// A document the server starts with (version 1 and on), as a backend's write would make it.
    mutating func seed(key: String, doc: SimDoc) throws {
        head += 1
        let k = ObjectKey(table: "Doc", key: .string(key))
        objects[k] = StoredObject(object: StampedObject(schema: os, key: .string(key), fields: [
            FieldValue(name: "ownerId", value: .string(doc.owner)), FieldValue(name: "title", value: .string(doc.title)),
            FieldValue(name: "counter", value: .int(doc.counter)), FieldValue(name: "rank", value: .int(doc.rank)),
        ], stamp: Stamp(timestamp: 1, fileIdent: 0), version: head))
        changes.append((head, [k]))
    }

    mutating func connected(_ device: Int) { sessions[device] = (0, 0) }

    /// The admin terminates sync and enables it again (as `SyncAdministration` with the real
    /// stores): every client file and its refusals are forgotten, the data stays, every
    /// connection closes. A device that binds a forgotten file must reset.
    mutating func terminateAndEnable() {
        files = [:]
        refusals = [:]
        sessions = [:]
        refusedBinds = []
        terminations += 1
    }
    mutating func disconnected(_ device: Int) { sessions[device] = nil }
    mutating func restart() { sessions = [:] }

    mutating func receive(_ message: ProtocolMessage, from device: Int, devices: [SimDevice], failure: (String) -> Error) throws {
        guard sessions[device] != nil else { return }
        switch message {
        case let .bind(session, _, ident, salt, lastServerVersion, answered):
            let answeredThrough = answered ?? 0
            refusedBinds.remove(device)
            var file = ident
            var repeated: [CompensatingWrite] = []
            var delivered = lastServerVersion
            if ident == 0 {
                file = nextFile
                nextFile += 1
                let newSalt = file &* 0x9E37_79B9 | 1
                files[file] = (newSalt, 0)
                delivered = 0
                devices[device].toDevice.append(.ident(session: SimMessage.session, clientFileIdent: file, clientFileSalt: newSalt))
            } else {
                guard ident < nextFile else { throw failure("device \(device) bound client file \(ident), which the server never issued") }
                // The hub's own policy (`BindRules`, as `SessionBinding` asks it).
                let known = files[ident].map { BindRules.KnownFile(saltMatches: $0.salt == salt, sameUser: true, lastSeen: 0) }
                switch BindRules.decide(ident: ident, file: known, lastServerVersion: lastServerVersion, head: head, now: 0, maxOfflineDays: 0) {
                case .bind:
                    break
                case .reset(.unknownClientFile, let message):
                    refusedBinds.insert(device)
                    resetsAsked += 1
                    devices[device].toDevice.append(.error(ProtocolError(session: session, code: ProtocolError.Code.badClientFile, message: message,
                                                                         tryAgain: false, action: BindRules.resetAction(recoveryDisabled: false))))
                    return
                case .reset(_, let message), .refuse(let message):
                    throw failure("device \(device)'s BIND was refused, which nothing here should cause: \(message)")
                }
                let f = files[ident]!
                // As `SessionBinding.bind`: the refusals the device has no answer for, with their
                // objects as they are now; what it has answered is forgotten.
                if replaysRefusals, let ledger = refusals[ident] {
                    (repeated, refusals[ident]) = ledger.atBind(answeredThrough: answeredThrough, acknowledged: f.acknowledged)
                }
            }
            sessions[device] = (file, delivered)
            refusalsRepeated += repeated.count
            send(to: device, devices: devices, extras: Set(repeated.map { ObjectKey(table: $0.objectType, key: $0.primaryKey) }), refused: repeated)
        case .upload(_, let changesets):
            if refusedBinds.contains(device) { return }
            guard let s = sessions[device], s.file != 0 else { throw failure("device \(device) uploaded before binding") }
            let acknowledged = files[s.file]?.acknowledged ?? 0
            let integration = try UploadIntegration(session: 1, clientFile: s.file, user: user, view: view, app: app, schema: schema,
                                                    acknowledged: acknowledged, changesets: changesets)
            var stored: [ObjectKey: StoredObject] = [:]
            for k in integration.keys { if let o = objects[k] { stored[k] = o } }
            let outcome = try integration.integrate(stored: stored, version: head + 1, now: clock.nanoseconds)
            for cw in outcome.compensating {
                guard case .string(let key) = cw.primaryKey, key.hasPrefix("x") else {
                    throw failure("the server refused a write the rules allow: \(cw.objectType) \(cw.primaryKey): \(cw.reason)")
                }
                reported.insert(key)
                refusalsSent += 1
            }
            // Durable with the acknowledgement, as the upload pipeline records them.
            refusals[s.file, default: RefusalLedger()].record(through: outcome.lastClientVersion, writes: outcome.compensating)
            let written = outcome.toStore
            if !written.isEmpty {
                head += 1
                for (k, o) in written { objects[k] = o }
                changes.append((head, Array(written.keys)))
            }
            files[s.file]?.acknowledged = max(acknowledged, outcome.lastClientVersion)
            send(to: device, devices: devices, extras: Set(outcome.entries.keys).union(integration.resend), refused: outcome.compensating)
            for other in sessions.keys.sorted() where other != device { send(to: other, devices: devices, extras: []) }
        case let .query(_, version, _):
            if refusedBinds.contains(device) { return }
            guard let s = sessions[device], s.file != 0 else { throw failure("device \(device) sent a QUERY before binding") }
            // The set's data: everything (the view here is every document), for that version.
            sessions[device]?.delivered = 0
            send(to: device, devices: devices, extras: [], subscriptionVersion: version)
        case let .mark(session, request):
            if refusedBinds.contains(device) { return }
            // As the real server: answered once everything before it was handled and sent
            // (here: at once, behind what this device was already sent).
            guard let s = sessions[device], s.file != 0 else { throw failure("device \(device) sent a MARK before binding") }
            devices[device].toDevice.append(.mark(session: session, request: request))
        default:
            throw failure("device \(device) sent \(SimMessage.describe(message)), which the simulation does not expect")
        }
    }

    /// What a bound session is owed: everything changed after the version it has, and `extras`.
    private mutating func send(to device: Int, devices: [SimDevice], extras: Set<ObjectKey>, refused: [CompensatingWrite] = [],
                               subscriptionVersion: UInt64 = 0) {
        guard let s = sessions[device], s.file != 0 else { return }
        var keys = extras
        for c in changes where c.version > s.delivered { keys.formUnion(c.keys) }
        guard !keys.isEmpty || s.delivered < head || !refused.isEmpty || subscriptionVersion > 0 else { return }
        let instructions: [Instruction] = keys.sorted { "\($0.key)" < "\($1.key)" }.map { k in
            objects[k]?.object?.fullState(os) ?? .erase(table: k.table, key: k.key)
        }
        sessions[device]?.delivered = head
        let changeset = DownloadChangeset(serverVersion: head, originFileIdent: 0,
                                          changeset: ChangesetCodec.encode(Changeset(timestamp: 0, instructions: instructions)))
        devices[device].toDevice.append(.download(session: SimMessage.session, serverVersion: head, uploadAcknowledged: files[s.file]?.acknowledged ?? 0,
                                                  subscriptionVersion: subscriptionVersion, downloadableBytes: 0, isLastInBatch: true, changesets: [changeset]))
        // ERROR 231: a message of its own, as on the wire (a connection may be lost between).
        if !refused.isEmpty {
            devices[device].toDevice.append(.error(ProtocolError(session: SimMessage.session, code: ProtocolError.Code.compensatingWrite,
                                                                 message: SyncErrorText.compensatingWriteMessage, tryAgain: true, action: .warning,
                                                                 compensatingWrites: refused)))
        }
    }

    /// The live documents.
    func docs() -> [String: SimDoc] {
        var out: [String: SimDoc] = [:]
        for (k, o) in objects {
            guard case .string(let key) = k.key, let values = o.object?.values, let doc = SimDoc(row: values, layout) else { continue }
            out[key] = doc
        }
        return out
    }
}

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
            case .downloaded(let d):
                // No subscription set is ever sent here: every batch settles what was asked.
                progress.downloaded(bytes: d.bytes, remaining: d.downloadable, settled: d.isLast)
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
