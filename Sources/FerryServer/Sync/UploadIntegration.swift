import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// The pure part of an upload: decodes its changesets, merges them into the objects' stored
/// states (FerryCore's `ObjectMerge`) and validates every object write against the role's write
/// filter and the session's subscriptions. No I/O: the hub reads the stored states inside the
/// storage transaction (`keys` says which), runs `integrate` at the version the transaction
/// will commit, and writes `Outcome.toStore`. Unit-tested without a server
/// (Tests/FerryServerTests/UploadIntegrationTests.swift).
struct UploadIntegration: Sendable {
    let session: UInt64
    let clientFile: UInt64
    let user: UserContext
    let view: SessionView
    let app: AppConfiguration
    let schema: Schema
    /// The client version the server had already made durable for this client file.
    let acknowledged: UInt64
    /// The changesets not yet acknowledged, decoded.
    private let fresh: [(upload: UploadChangeset, changeset: Changeset)]
    /// Objects of changesets the server had already acknowledged: the client uploads them
    /// again only when it missed the acknowledgement (its session ended first), so it may also
    /// have missed their echoes and reverts: it gets the objects' current state.
    let resend: Set<ObjectKey>
    /// The newest client version among the changesets already acknowledged (0: none).
    private let newestResent: UInt64

    /// What one upload did to one object.
    struct Entry: Sendable {
        var stored: StoredObject
        /// The object before the upload (for erases of what left a view).
        let before: StampedObject?
        var changed = false
        /// Every instruction applied exactly as the client made it, with no concurrent change:
        /// the uploader already has this state (no echo).
        var exact = true
        var rejected = false
        /// The store had no row for the key when the merge read it (not even a tombstone).
        var absent = false
    }

    struct Outcome: Sendable {
        var entries: [ObjectKey: Entry] = [:]
        var compensating: [CompensatingWrite] = []
        /// The last client version of the upload: acknowledged once the transaction commits.
        var lastClientVersion: UInt64
        /// The objects to write at the new version.
        var toStore: [ObjectKey: StoredObject] {
            var out: [ObjectKey: StoredObject] = [:]
            out.reserveCapacity(entries.count)
            for (k, e) in entries where e.changed { out[k] = e.stored }
            return out
        }
        /// Those of `toStore` the store had no row for (`SyncWriteTransaction.write`'s
        /// `absent`: a plain insert, cheaper than an upsert on PostgreSQL).
        var absentToStore: Set<ObjectKey> {
            var out: Set<ObjectKey> = []
            for (k, e) in entries where e.changed && e.absent { out.insert(k) }
            return out
        }
    }

    /// One uploaded changeset, decoded before the upload reaches the hub (on the connection's
    /// own task, so decoding runs in parallel for different connections).
    struct Decoded: Sendable {
        let upload: UploadChangeset
        let changeset: Result<Changeset, DecodeFailure>

        /// The same changeset with its base no later than `highest`, the newest server version
        /// the session was sent: a client cannot have integrated more, and a later base would
        /// let it probe when another user's fields last changed (issue 22, point 5).
        func cappingBase(at highest: UInt64) -> Decoded {
            guard upload.lastIntegratedServerVersion > highest else { return self }
            var capped = upload
            capped.lastIntegratedServerVersion = highest
            return Decoded(upload: capped, changeset: changeset)
        }

        private init(upload: UploadChangeset, changeset: Result<Changeset, DecodeFailure>) {
            self.upload = upload
            self.changeset = changeset
        }

        init(_ upload: UploadChangeset) {
            self.upload = upload
            do { changeset = .success(try ChangesetCodec.decode(upload.changeset)) } catch {
                changeset = .failure(DecodeFailure(description: "\(error)"))
            }
        }

        static func all(_ changesets: [UploadChangeset]) -> [Decoded] { changesets.map(Decoded.init) }

        /// The instructions of a well-formed changeset (0 for a malformed one).
        var instructionCount: Int {
            if case .success(let c) = changeset { c.instructions.count } else { 0 }
        }
    }

    /// Why a changeset could not be decoded.
    struct DecodeFailure: Error, Sendable, CustomStringConvertible {
        let description: String
    }

    /// Decodes the changesets (a malformed one ends the session with error 212).
    init(session: UInt64, clientFile: UInt64, user: UserContext, view: SessionView, app: AppConfiguration, schema: Schema,
         acknowledged: UInt64, changesets: [UploadChangeset]) throws {
        try self.init(session: session, clientFile: clientFile, user: user, view: view, app: app, schema: schema,
                      acknowledged: acknowledged, decoded: Decoded.all(changesets))
    }

    /// Takes changesets decoded beforehand (a malformed fresh one ends the session with error
    /// 212; one already acknowledged is only read for the objects it names).
    init(session: UInt64, clientFile: UInt64, user: UserContext, view: SessionView, app: AppConfiguration, schema: Schema,
         acknowledged: UInt64, decoded changesets: [Decoded]) throws {
        self.session = session
        self.clientFile = clientFile
        self.user = user
        self.view = view
        self.app = app
        self.schema = schema
        self.acknowledged = acknowledged
        var resend: Set<ObjectKey> = []
        var fresh: [(UploadChangeset, Changeset)] = []
        var newestResent: UInt64 = 0
        for d in changesets {
            let upload = d.upload
            if upload.clientVersion <= acknowledged {
                newestResent = max(newestResent, upload.clientVersion)
                guard case .success(let known) = d.changeset else { continue }
                for i in known.instructions { resend.insert(ObjectKey(table: i.table, key: i.key)) }
                continue
            }
            switch d.changeset {
            case .success(let c): fresh.append((upload, c))
            case .failure(let error):
                throw SessionFailure(session, ProtocolError.Code.badChangeset, "client version \(upload.clientVersion): a malformed changeset (\(error))", .protocolViolation)
            }
        }
        self.fresh = fresh
        self.resend = resend
        self.newestResent = newestResent
    }

    /// Whether this upload, split at `other` instead of `acknowledged`, splits the same way and
    /// merges to the same outcome: no changeset's client version lies between the two, and
    /// some changeset is fresh (with none, the outcome's `lastClientVersion` is the
    /// acknowledged version itself). The usual case: the connection's previous upload was
    /// acknowledged while this one was merged ahead of its turn.
    func splitsAlike(acknowledged other: UInt64) -> Bool {
        if other == acknowledged { return true }
        guard let oldestFresh = fresh.map(\.upload.clientVersion).min() else { return false }
        return other < acknowledged ? newestResent <= other : oldestFresh > other
    }

    /// Every object the merge reads (read them in the transaction, before `integrate`).
    var keys: [ObjectKey] {
        var seen: Set<ObjectKey> = []
        var out: [ObjectKey] = []
        for (_, c) in fresh {
            for i in c.instructions {
                let k = ObjectKey(table: i.table, key: i.key)
                if seen.insert(k).inserted { out.append(k) }
            }
        }
        return out
    }

    /// Merges and validates the fresh changesets into `stored` (the states `keys` named, as
    /// read in the transaction) as server version `version`.
    func integrate(stored: [ObjectKey: StoredObject], version: UInt64, now: Int64 = WallClock.system.nanosecondsSinceEpoch()) throws -> Outcome {
        var outcome = Outcome(lastClientVersion: acknowledged)
        var validators: [String: WriteValidator] = [:]
        for (upload, changeset) in fresh {
            outcome.lastClientVersion = max(outcome.lastClientVersion, upload.clientVersion)
            let stamp = UploadClock.stamp(changeset.timestamp, fileIdent: clientFile, now: now)
            let base = upload.lastIntegratedServerVersion
            // Each run of instructions on one object is judged as a whole write.
            let instructions = changeset.instructions
            var i = 0
            while i < instructions.count {
                let first = instructions[i]
                var end = i + 1
                while end < instructions.count, instructions[end].key == first.key, instructions[end].table == first.table { end += 1 }
                defer { i = end }
                guard let os = schema.objectSchema(named: first.table) else {
                    throw SessionFailure(session, ProtocolError.Code.badChangeset, "client version \(upload.clientVersion): no object type '\(first.table)' in the app's schema", .protocolViolation)
                }
                let k = ObjectKey(table: first.table, key: first.key)
                // The object's entry is taken out of the dictionary for the run and put back
                // once (one hash of the key, not one per field of the entry).
                var entry: Entry
                if let known = outcome.entries.removeValue(forKey: k) { entry = known } else {
                    let s = stored[k]
                    entry = Entry(stored: s ?? StoredObject(object: nil), before: s?.object, absent: s == nil)
                }
                defer { outcome.entries[k] = entry }
                let start = entry.stored
                if let existing = start.object, !view.mayRead(existing.values, of: os, app: app) {
                    // A create of a key another user's object already holds, one this user may
                    // not read: refused with its own reason, and nothing of that object is sent
                    // (primary keys are global per class; a guessed key must not destroy or
                    // reveal another user's object).
                    if instructions[i..<end].contains(where: { if case .create = $0 { true } else { false } }) {
                        outcome.compensating.append(.keyTaken(objectType: os.name, primaryKey: first.key))
                        entry.rejected = true
                        entry.exact = false
                        continue
                    }
                    // Any other write to it is a write to a missing object: checked against the
                    // schema as one, changing nothing, with no compensating write. A 231 here
                    // would answer "does this key exist?" (issue 22, point 5). The answer is
                    // the same too: the object's erase (`SyncHub.respond`).
                    var missing: StampedObject? = nil
                    var noLists = ListOperationLog()
                    for n in i..<end {
                        do {
                            try ObjectMerge.apply(instructions[n], to: &missing, schema: os, stamp: stamp, base: base, version: version, lists: &noLists)
                        } catch let e as FerryError {
                            throw SessionFailure(session, ProtocolError.Code.badChangeset, "client version \(upload.clientVersion): \(e.message)", .protocolViolation)
                        }
                    }
                    entry.exact = false
                    continue
                }
                var next = start
                var didChange = false
                var asIs = (start.object?.versions.max() ?? 0) <= base
                for n in i..<end {
                    do {
                        let applied = try ObjectMerge.apply(instructions[n], to: &next.object, schema: os, stamp: stamp, base: base,
                                                            version: version, lists: &next.lists)
                        didChange = applied.changed || didChange
                        asIs = asIs && applied == .applied
                    } catch let e as FerryError {
                        throw SessionFailure(session, ProtocolError.Code.badChangeset, "client version \(upload.clientVersion): \(e.message)", .protocolViolation)
                    }
                }
                guard didChange else {
                    entry.exact = false
                    continue
                }
                let validator: WriteValidator
                if let v = validators[os.name] { validator = v } else {
                    validator = WriteValidator(objectSchema: os, rules: app.rules(for: os.name) ?? CollectionRules(roles: []),
                                               subscriptions: view.subscriptions(of: os.name))
                    validators[os.name] = validator
                }
                if let cw = validator.check(user: user, before: start.object?.values, after: next.object?.values) {
                    outcome.compensating.append(cw)
                    entry.rejected = true
                    continue
                }
                // A tombstone keeps the object's last values: who may learn of the erase.
                next.erasedState = next.object == nil ? (start.object ?? start.erasedState) : nil
                entry.stored = next
                entry.changed = true
                if !asIs { entry.exact = false }
            }
        }
        return outcome
    }
}
