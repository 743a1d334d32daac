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
