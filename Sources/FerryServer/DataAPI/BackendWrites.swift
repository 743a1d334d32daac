import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// Sync is not running (terminated or paused by an admin): a backend's write waits for it
/// like a device's (the Data API's 503).
struct BackendWriteRefused: Error {
    let message: String
}

/// What one backend write did: the server version it committed as (the head when it changed
/// nothing), and per object whether it existed before and whether it changed.
struct BackendWriteResult: Sendable {
    struct Object: Sendable {
        let existed: Bool
        let changed: Bool
    }
    let version: UInt64
    let objects: [ObjectKey: Object]
    /// Writes the merge refused (none for a server key, whose role allows everything; kept
    /// so that a refusal is never silent).
    let compensating: [CompensatingWrite]
}

/// A backend's writes (the Data API's, SPEC F-BACKEND): each is one changeset, merged,
/// validated and fanned out exactly as a device's upload is, as an upload of a client file of
/// the server key's own (created at its first write on this node). A server key runs as the
/// system: every class is in its view and its role may read, write, insert and delete
/// anything; the schema is still checked (a wrong type or a missing required value fails the
/// whole changeset, and nothing of it is applied).
///
/// One write at a time per node: a key's client versions must commit in the order they were
/// given, or a later one acknowledged first would make the earlier one look like a resend.
actor BackendWrites {
    private let hub: SyncHub
    private let storage: any SyncStorage
    private let systemView: SessionView
    private let systemRules: AppConfiguration
    private var files: [String: (ident: UInt64, version: UInt64)] = [:]
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(hub: SyncHub, storage: any SyncStorage, app: AppConfiguration, schema: Schema) throws {
        self.hub = hub
        self.storage = storage
        let system = Role(name: "system", read: true, write: true, insert: true, delete: true)
        var rules = app
        rules.collections = app.collections.map { c in
            var c = c
            c.rules = CollectionRules(roles: [system])
            return c
        }
        rules.defaultRules = CollectionRules(roles: [system])
        systemRules = rules
        var queries: [String: [CompiledQuery]] = [:]
        var roles: [String: Role?] = [:]
        for os in schema.classes {
            queries[os.name] = [try CompiledQuery("TRUEPREDICATE", on: os)]
            roles[os.name] = .some(system)
        }
        systemView = SessionView(user: UserContext(id: "data-api"), queries: queries, roles: roles)
    }

    /// The user a server key writes as: what the sync log and stamps name.
    static func userId(ofKey name: String) -> String { "data-api:\(name)" }

    func write(key name: String, _ instructions: [Instruction], timestamp: Int64 = UploadClock.nanosecondsSinceEpoch()) async throws -> BackendWriteResult {
        await takeTurn()
        defer { passTurn() }
        let user = UserContext(id: Self.userId(ofKey: name))
        var file: (ident: UInt64, version: UInt64)
        if let known = files[name] { file = known } else { file = (try await storage.newClientFile(userId: user.id).ident, 0) }
        file.version += 1
        let head = try await storage.syncState().headVersion
        let upload = UploadChangeset(clientVersion: file.version, lastIntegratedServerVersion: head,
                                     changeset: ChangesetCodec.encode(Changeset(timestamp: timestamp, instructions: instructions)))
        let (outcome, version) = try await hub.commitServerOrigin(clientFile: file.ident, user: user, view: systemView, rules: systemRules, upload: upload)
        files[name] = file
        return BackendWriteResult(version: version, objects: outcome.entries.mapValues { .init(existed: $0.before != nil, changed: $0.changed) },
                                  compensating: outcome.compensating)
    }

    private func takeTurn() async {
        guard busy else {
            busy = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func passTurn() {
        if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
    }
}
