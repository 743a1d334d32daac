import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// The one path every write to synced data takes into the store: a device's upload, a
/// backend's Data API write and a backend's captured SQL writes (`SyncHub.commitServerOrigin`).
/// Merged and validated (`UploadIntegration`), committed with the writes that arrived meanwhile
/// in one storage transaction that assigns the version and makes them durable (`GroupCommit`),
/// then handed to the hub to fan out (`CommitDelivery.fanOut`, before any of the group's writers hears back).
/// Holds no session state: which sessions are told what is the hub's job.
final class UploadPipeline: Sendable {
    /// What an upload's transaction returns to the hub.
    struct Committed: Sendable {
        /// The uploading session (connection 0: a backend's write).
        let origin: SessionKey
        let integration: UploadIntegration
        let outcome: UploadIntegration.Outcome
        /// The head before and after the transaction.
        let before: UInt64
        let after: UInt64
        /// Whether the merge made outside the lock was committed (not merged again under it).
        let premerged: Bool
    }

    /// What an upload's turn in a group's transaction did: committed, or found that what its
    /// merge read outside the lock has moved (it merges again and takes the next group).
    enum Attempt: Sendable {
        case committed(Committed)
        case stale
    }

    /// How many times an upload is merged outside the write lock before it is merged under it.
    static let maxPremerges = 3

    let app: AppConfiguration
    let schema: Schema
    let storage: any SyncStorage
    let limits: SyncLimits
    let telemetry: SyncTelemetry
    /// `ServerConfiguration.beforeUploadMerge` (tests).
    let beforeUploadMerge: (@Sendable (String) async -> Void)?
    /// What this node's latest commits wrote (`RecentCommits`): an upload merged while its
    /// connection's previous upload committed checks its reads against it, not the store.
    /// Behind a lock: the check runs inside the group's transaction.
    let recentCommits: LockedValue<RecentCommits>
    private let commits: GroupCommit<Attempt>

    /// `fanOut`: the hub's (`CommitDelivery.fanOut`), called with each group's commits after its transaction committed.
    init(app: AppConfiguration, schema: Schema, storage: any SyncStorage, limits: SyncLimits, telemetry: SyncTelemetry,
         recentCommits: LockedValue<RecentCommits>, beforeUploadMerge: (@Sendable (String) async -> Void)?,
         fanOut: @escaping @Sendable ([Committed]) async -> Void) {
        (self.app, self.schema, self.storage, self.limits, self.telemetry) = (app, schema, storage, limits, telemetry)
        (self.recentCommits, self.beforeUploadMerge) = (recentCommits, beforeUploadMerge)
        commits = GroupCommit<Attempt>(storage: storage, schema: schema) { group in
            await fanOut(group.compactMap { if case .committed(let c) = $0 { c } else { nil } })
        }
    }

    /// Merges and validates an upload, then commits it: a large upload (`SyncLimits.
    /// premergeFromInstructions`) is merged first, off the hub and outside the app's write
    /// lock, beside other users' uploads (`PremergedUpload`); a small one under it. The
    /// version is assigned and the upload made durable in a storage transaction under the
    /// lock, with the uploads that arrived meanwhile (`GroupCommit`). When what the merge read
    /// moved before the lock, it merges again; the last try merges under the lock. The group's
    /// fan-out (the hub's) ran before this returns. `ahead`: the merge `prepareAhead` made before the
    /// upload's turn, taken as the first try.
    /// `rules`: the app whose rules judge the writes (a server key's: everything allowed).
    func commit(from origin: SessionKey, clientFile: UInt64, user: UserContext, view: SessionView, known: UInt64,
                changesets: [UploadIntegration.Decoded], keys: [ObjectKey], ahead: PremergedUpload?,
                rules: AppConfiguration? = nil, refuseCompensated: Bool = false,
                captured: (transaction: Int64, keys: [ObjectKey])? = nil) async throws -> Committed {
        let (app, schema, storage, recentCommits) = (rules ?? self.app, self.schema, self.storage, self.recentCommits)
        var ahead = ahead
        // Small uploads are merged under the lock: their merge costs less than the read outside it.
        let outside = keys.count >= limits.premergeFromInstructions
        var tries = 0
        while true {
            tries += 1
            let lastTry = !outside || tries >= Self.maxPremerges
            let premerged: PremergedUpload?
            let wasAhead = ahead != nil
            if let made = ahead {
                (premerged, ahead) = (made, nil)
            } else if outside {
                premerged = try await PremergedUpload.make(storage: storage, session: origin.session, clientFile: clientFile, user: user, view: view,
                                                           app: app, schema: schema, known: known, changesets: changesets, beforeMerge: beforeUploadMerge)
            } else {
                premerged = nil
            }
            // A merge made outside the lock read its objects already; under the lock it reads
            // them again only if the head moved meanwhile (`isCurrent`), so the group does not
            // read them ahead (on PostgreSQL that second read halved a bulk upload's rate).
            let reads = GroupCommit<Attempt>.Reads(clientFile: clientFile, keys: premerged == nil ? keys : [])
            let attempt = try await commits.commit(reads: reads) { tx -> Attempt in
                // The durable acknowledgement, not the session's copy: another session of the same
                // file (a reconnect racing an upload still in flight on another connection or
                // node) may have moved it. Nothing is applied twice.
                let acknowledged = max(known, try await tx.clientFile(clientFile)?.acknowledgedClientVersion ?? 0)
                let before = tx.headVersion
                let integration: UploadIntegration
                let outcome: UploadIntegration.Outcome
                var used = false
                if let premerged, try await premerged.isCurrent(acknowledged: acknowledged, head: before, untouched: { keys, read, head in
                    recentCommits.withLock { $0.untouched(keys, after: read, through: head) }
                }, stored: {
                    try await tx.objects(premerged.keys, schema: schema)
                }) {
                    integration = premerged.integration
                    outcome = premerged.outcome(at: before + 1)
                    used = true
                } else if premerged != nil, !lastTry {
                    return .stale
                } else {
                    integration = try UploadIntegration(session: origin.session, clientFile: clientFile, user: user, view: view, app: app, schema: schema,
                                                        acknowledged: acknowledged, decoded: changesets)
                    let stored = try await tx.objects(integration.keys, schema: schema)
                    outcome = try integration.integrate(stored: stored, version: before + 1)
                }
                // A caller that must not be half-applied (a user's Data API write): the whole
                // write fails before anything of it is written (`GroupCommit`: a job's own
                // failure leaves the group's other jobs alone).
                if refuseCompensated, !outcome.compensating.isEmpty {
                    throw SessionFailure(origin.session, ProtocolError.Code.compensatingWrite,
                                         outcome.compensating.map { "\($0.objectType) \($0.primaryKey.keyText): \($0.reason)" }.joined(separator: "; "), .warning)
                }
                // Checked last: a job's failure must leave nothing written in the group's
                // transaction, and taking the captured writes is this job's only other write.
                if let captured, !(try await tx.consumeCapturedWrites(transaction: captured.transaction, restoring: captured.keys)) {
                    throw SessionFailure(origin.session, SyncHub.capturedWritesGoneCode, "the SQL writes of transaction \(captured.transaction) were integrated already", .warning)
                }
                let after = try await tx.write(objects: outcome.toStore, absent: outcome.absentToStore, clientFile: clientFile,
                                               clientVersion: outcome.lastClientVersion)
                // A device's refusals are durable with the acknowledgement they follow, so one
                // whose answer is lost is sent again at its next BIND (`RefusalLedger`).
                if origin.connection != 0, !outcome.compensating.isEmpty {
                    try await tx.recordRefusals(clientFile: clientFile, through: outcome.lastClientVersion, writes: outcome.compensating)
                }
                return .committed(Committed(origin: origin, integration: integration, outcome: outcome, before: before, after: after, premerged: used))
            }
            if premerged != nil {
                let used = if case .committed(let c) = attempt { c.premerged } else { false }
                telemetry.metrics.premerge(ahead: wasAhead, used: used)
            }
            if case .committed(let committed) = attempt { return committed }
        }
    }

}
