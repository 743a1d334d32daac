import FerryAppConfig
import FerryCore
import FerrySyncStorage

/// An upload merged and validated before it takes the app's write lock, beside other users'
/// uploads and off the hub: on the states read from storage just before, at a provisional
/// version above every real one (the real one is only known under the lock).
///
/// Inside the group's transaction the hub checks that nothing the merge read has moved: the
/// client file's acknowledged version and every object's stored state. When nothing has, the
/// commit only stamps the real version and writes, so the lock is held for what orders the
/// app's history and not for the merge. When something moved (another upload to the same
/// objects committed in between), the upload is merged again outside the lock, a bounded
/// number of times (`UploadPipeline.maxPremerges`), then under it: a user whose objects are busy
/// costs its own uploads, not everyone's.
///
/// The outcome does not depend on the version it was merged at: the merge compares versions
/// only with the uploader's base (`Stamp.supersedes`, `ListOperationLog.transform`), which is
/// below the provisional version and the real one alike.
struct PremergedUpload: Sendable {
    /// Above every version a store reaches, and still a valid BIGINT.
    static let provisionalVersion = UInt64(Int64.max)

    /// The client version the server had acknowledged when the merge read.
    let acknowledged: UInt64
    /// The head before the merge read its objects: a transaction that sees the same head
    /// sees the same objects (nothing was committed since), so it need not read them again.
    let readHead: UInt64
    let integration: UploadIntegration
    /// The objects the merge read (`integration.keys`, computed once).
    let keys: [ObjectKey]
    /// The stored states the merge read (missing keys: no such object).
    let read: [ObjectKey: StoredObject]
    /// The merge at `provisionalVersion`.
    private let provisional: UploadIntegration.Outcome

    /// Reads what the upload's merge needs from storage (outside any transaction) and merges.
    /// nil when the upload is to be merged under the lock as it stands there: its changesets
    /// are malformed or do not apply, and the transaction's own merge says so with the
    /// authoritative state. `beforeMerge` is awaited between the read and the merge (tests).
    static func make(storage: any SyncStorage, session: UInt64, clientFile: UInt64, user: UserContext, view: SessionView,
                     app: AppConfiguration, schema: Schema, known: UInt64, changesets: [UploadIntegration.Decoded],
                     beforeMerge: (@Sendable (String) async -> Void)? = nil) async throws -> PremergedUpload? {
        // The head first: objects read after it are at least as new.
        let readHead = try await storage.syncState().headVersion
        let acknowledged = max(known, try await storage.clientFile(clientFile)?.acknowledgedClientVersion ?? 0)
        // A merge ahead is only an early start: whatever fails here fails again in the upload's
        // own turn under the lock, which reports it. So do the two `try?` below.
        guard let integration = try? UploadIntegration(session: session, clientFile: clientFile, user: user, view: view, app: app,
                                                       schema: schema, acknowledged: acknowledged, decoded: changesets) else { return nil }
        let keys = integration.keys
        let read = keys.isEmpty ? [:] : try await storage.objects(keys, schema: schema)
        if let beforeMerge { await beforeMerge(user.id) }
        guard let outcome = try? integration.integrate(stored: read, version: provisionalVersion) else { return nil }
        return PremergedUpload(acknowledged: acknowledged, readHead: readHead, integration: integration, keys: keys, read: read, provisional: outcome)
    }

    /// Whether a transaction at `head`, where the client file's acknowledged version is
    /// `acknowledged`, sees what the merge read: the upload splits into fresh and known
    /// changesets as it did (`UploadIntegration.splitsAlike`), and nothing the merge read
    /// changed since: no commit since the read (`head == readHead`), or only commits
    /// `untouched` vouches for (this node's own, none of which wrote these keys), or else what
    /// `stored` reads is what the merge read.
    func isCurrent(acknowledged: UInt64, head: UInt64, untouched: ([ObjectKey], UInt64, UInt64) -> Bool,
                   stored: () async throws -> [ObjectKey: StoredObject]) async throws -> Bool {
        guard integration.splitsAlike(acknowledged: acknowledged) else { return false }
        if head == readHead { return true }
        if head > readHead, untouched(keys, readHead, head) { return true }
        return try await stored() == read
    }

    /// The merge's outcome as committed at `version`.
    func outcome(at version: UInt64) -> UploadIntegration.Outcome {
        var outcome = provisional
        // mapValues keeps the dictionary's layout: no key is hashed again.
        outcome.entries = provisional.entries.mapValues { entry in
            var entry = entry
            entry.stored.restamp(Self.provisionalVersion, to: version)
            return entry
        }
        return outcome
    }
}
