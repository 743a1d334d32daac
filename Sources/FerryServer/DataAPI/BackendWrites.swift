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
        /// The object's values before the write (nil: it did not exist).
        let before: [FerryValue]?
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
/// A user's access token writes with that user's rules instead (`write(as:)`).
///
/// One write at a time per node: a key's client versions must commit in the order they were
/// given, or a later one acknowledged first would make the earlier one look like a resend.
actor BackendWrites {
    private let hub: SyncHub
    private let storage: any SyncStorage
    private let systemView: SessionView
    private let systemRules: AppConfiguration
    private let app: AppConfiguration
    private var files: [String: (ident: UInt64, version: UInt64)] = [:]
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(hub: SyncHub, storage: any SyncStorage, app: AppConfiguration, schema: Schema) throws {
        self.hub = hub
        self.storage = storage
        self.app = app
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
    /// The owner recorded for the client file of a user's Data API writes: not the user's
    /// own id, so the file does not count against the user's device quota; the change feed
    /// still says which user made a change (`author(ofFileUser:)`).
    static func fileOwner(ofUser id: String) -> String { "data-api-user:\(id)" }
    /// Who made the changes of a client file owned by `userId`.
    static func author(ofFileUser userId: String) -> ChangeAuthor {
        if userId == sqlWriter { return .sql }
        if userId.hasPrefix("data-api-user:") { return .user(String(userId.dropFirst("data-api-user:".count))) }
        if userId.hasPrefix("data-api:") { return .key(String(userId.dropFirst("data-api:".count))) }
        return .user(userId)
    }
    /// Client files this node remembers at most; past it they are forgotten and a caller's
    /// next write makes a new one (a node restart does the same).
    static let maxFiles = 10_000

    /// What a caller's reads and writes are judged by: nil for a server key that runs as the
    /// system (everything allowed); else the view (every class, the caller's role on each)
    /// and the rules its writes are merged with.
    nonisolated func access(_ caller: DataAPICaller) -> (view: SessionView, rules: AppConfiguration)? {
        switch caller {
        case .user(let u): return (userView(u), app)
        case .key(let key):
            guard let role = key.role else { return nil }
            let rules = Self.rules(app, asRole: role)
            let user = UserContext(id: Self.userId(ofKey: key.name))
            var roles: [String: Role?] = [:]
            for name in systemView.queries.keys { roles[name] = .some(rules.rules(for: name).role(for: user)) }
            return (SessionView(user: user, queries: systemView.queries, roles: roles), rules)
        }
    }

    /// The app's rules with, on each class, only its role named `role`, applied to whoever
    /// calls (its `apply_when` is for users, a key has none); a class without such a role
    /// gives no access.
    static func rules(_ app: AppConfiguration, asRole role: String) -> AppConfiguration {
        func only(_ rules: CollectionRules) -> CollectionRules {
            CollectionRules(roles: rules.roles.filter { $0.name == role }.prefix(1).map { r in
                var r = r
                r.applyWhen = .all
                return r
            })
        }
        var out = app
        out.collections = app.collections.map { c in
            var c = c
            c.rules = c.rules.map(only)
            return c
        }
        out.defaultRules = app.defaultRules.map(only)
        return out
    }

    /// Every class in view, and the user's role on each from the app's rules.
    nonisolated func userView(_ user: UserContext) -> SessionView {
        var queries: [String: [CompiledQuery]] = [:]
        var roles: [String: Role?] = [:]
        for (name, q) in systemView.queries {
            queries[name] = q
            roles[name] = .some(app.rules(for: name).role(for: user))
        }
        return SessionView(user: user, queries: queries, roles: roles)
    }

    /// One changeset written as `caller`: a server key as the system; a user with the app's
    /// rules, all or nothing (a write the rules refuse fails the whole call: `SessionFailure`
    /// with the compensating-write code and the seeds' reasons).
    /// `basedOn`: the server version the instructions were made on (list positions count
    /// there); nil: the head now.
    func write(as caller: DataAPICaller, _ instructions: [Instruction], timestamp: Int64 = WallClock.system.nanosecondsSinceEpoch(),
               basedOn: UInt64? = nil) async throws -> BackendWriteResult {
        switch caller {
        case .key(let key):
            let (view, rules, refuse) = access(caller).map { ($0.view, $0.rules, true) } ?? (systemView, systemRules, false)
            return try await commit(user: view.user, fileName: Self.userId(ofKey: key.name), view: view,
                                    rules: rules, refuse: refuse, instructions, timestamp: timestamp, basedOn: basedOn)
        case .user(let u):
            return try await commit(user: u, fileName: Self.fileOwner(ofUser: u.id), view: userView(u), rules: app, refuse: true, instructions,
                                    timestamp: timestamp, basedOn: basedOn)
        }
    }

    /// A backend's captured SQL writes (`SQLWriteIntegrator`), as the system, taken out of the
    /// inbox in the commit's transaction; `timestamp`: when they were written.
    func writeCaptured(_ instructions: [Instruction], timestamp: Int64, transaction: Int64, keys: [ObjectKey]) async throws -> BackendWriteResult {
        try await commit(user: UserContext(id: Self.sqlWriter), fileName: Self.sqlWriter, view: systemView, rules: systemRules, refuse: false,
                         instructions, timestamp: timestamp, captured: (transaction, keys))
    }

    /// The owner of the client file of SQL writes (the change feed says `{"sql": true}`).
    static let sqlWriter = "sql-writes"

    private func commit(user: UserContext, fileName: String, view: SessionView, rules: AppConfiguration, refuse: Bool, _ instructions: [Instruction],
                        timestamp: Int64, basedOn: UInt64? = nil, captured: (transaction: Int64, keys: [ObjectKey])? = nil) async throws -> BackendWriteResult {
        await takeTurn()
        defer { passTurn() }
        var file: (ident: UInt64, version: UInt64)
        if let known = files[fileName] { file = known } else { file = (try await storage.newClientFile(userId: fileName).ident, 0) }
        file.version += 1
        let head = if let basedOn { basedOn } else { try await storage.syncState().headVersion }
        let upload = UploadChangeset(clientVersion: file.version, lastIntegratedServerVersion: head,
                                     changeset: ChangesetCodec.encode(Changeset(timestamp: timestamp, instructions: instructions)))
        // The version is used whether or not the write succeeds: a refused one is never
        // acknowledged, and the next must not look like its resend.
        if files[fileName] == nil, files.count >= Self.maxFiles { files.removeAll(keepingCapacity: true) }
        files[fileName] = file
        let (outcome, version) = try await hub.commitServerOrigin(clientFile: file.ident, user: user, view: view, rules: rules,
                                                                  refuseCompensated: refuse, upload: upload, captured: captured)
        return BackendWriteResult(version: version, objects: outcome.entries.mapValues { .init(before: $0.before?.values, changed: $0.changed) },
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
