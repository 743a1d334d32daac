import FerryCore
import FerryStore

/// The pre-flight check of one synced database (SPEC F-PRECHECK), installed on its store by
/// the sync session: every local commit's objects are judged by `WriteValidator`, as the
/// server will judge them, against the file's latest subscription set and the write rules the
/// server last published to this file's sessions (kept in the file, so the check works offline
/// after a restart). Until a server has published rules, only the subscriptions are checked.
///
/// What it holds is replaced from the loop thread (rules) and the host's threads
/// (subscription updates) and read by committing threads: guarded by a lock.
final class WritePrecheck: CommitCheck, @unchecked Sendable {
    let mode: PrecheckMode
    private let handler: (@Sendable ([CompensatingWrite], Bool) -> Void)?
    private let lock = ThreadLock()
    private var rules: WriteRules?
    private var subscriptions: [Subscription] = []
    /// Validators by class, built on first use from `rules` and `subscriptions`.
    private var validators: [String: WriteValidator] = [:]

    /// The key the rules are kept under in the file (`Database.syncValue`).
    static let rulesKey = "write_rules"
    /// The rules expand every `%%user` value on the server: the device's check needs no user.
    private static let user = UserContext(id: "")

    init(mode: PrecheckMode, handler: (@Sendable ([CompensatingWrite], Bool) -> Void)?) {
        self.mode = mode
        self.handler = handler
    }

    var rejectsCommit: Bool { mode == .strict }

    /// The rules the server published, if any yet.
    var currentRules: WriteRules? { lock.withLock { rules } }

    func update(rules: WriteRules?) {
        lock.withLock {
            self.rules = rules
            validators.removeAll()
        }
    }

    func update(subscriptions: [Subscription]) {
        lock.withLock {
            self.subscriptions = subscriptions
            validators.removeAll()
        }
    }

    func check(_ writes: [ObjectWrite]) -> [CompensatingWrite] {
        lock.withLock {
            writes.compactMap { w in validator(w.objectSchema).check(user: Self.user, before: w.before, after: w.after) }
        }
    }

    func report(_ rejected: [CompensatingWrite], committed: Bool) {
        handler?(rejected, committed)
    }

    /// Called with the lock held.
    private func validator(_ os: ObjectSchema) -> WriteValidator {
        if let v = validators[os.name] { return v }
        let queries = subscriptions.filter { $0.objectType == os.name }.compactMap { try? CompiledQuery($0.query, on: os) }
        let collection: CollectionRules
        if let published = rules?.rules(for: os.name) {
            collection = published.collectionRules
        } else {
            // No rules known for the class (none published yet, or a class the server does not
            // have): a role that allows every write, so only the subscriptions decide.
            collection = CollectionRules(roles: [Role(name: "", write: true)])
        }
        let v = WriteValidator(objectSchema: os, rules: collection, subscriptions: queries)
        validators[os.name] = v
        return v
    }
}
