import FerryCore

/// The server's durable state behind one backend-neutral, asynchronous protocol: the embedded
/// SQLite store and PostgreSQL implement it, and the conformance suite
/// (Tests/FerryStorageConformanceTests) holds both to the same behaviour.
///
/// The storage owns ordering: the server version of an upload is assigned inside the
/// transaction that makes it durable (`writeTransaction`), under a lock that serialises the
/// app's writers across every node sharing the store. Nothing about versions is kept in
/// memory, so a failed transaction never leaves a gap and two nodes never hand out one version
/// twice. Calls may come from any task at any time.
public protocol SyncStorage: AnyObject, Sendable {
    /// What the backend is, for logs ("SQLite /path/sync.sqlite", "PostgreSQL host:port/db").
    var description: String { get }

    /// Wakes this node when the app's history or sync state moved (commits of every node).
    var changeFeed: any ChangeFeed { get }

    // MARK: Sync state

    /// The app's sync state and history head, as committed now.
    func syncState() async throws -> SyncState
    /// Admin: terminate (`false`) or enable (`true`) sync. Enabling after a terminate forgets
    /// every client file and starts a new sync identity (`SyncState.generation`); enabling an
    /// enabled app changes nothing, and neither does enabling a paused one (it is resumed, or
    /// terminated first). Terminating a paused app ends the pause: only an enable restarts
    /// sync then. Every change grows `SyncState.revision`. Returns the state after the call
    /// (the rule: `SyncState.after(_:)`).
    @discardableResult
    func setSyncEnabled(_ enabled: Bool) async throws -> SyncState
    /// Admin: pause (`true`) or resume (`false`) sync. A pause stops an enabled app like a
    /// terminate, but keeps the sync identity and every client file; a resume of a paused app
    /// enables it again with both unchanged (devices carry on, no reset). Pausing a paused or
    /// terminated app, or resuming one that is not paused, changes nothing. Every change grows
    /// `SyncState.revision`. Returns the state after the call (the rule: `SyncState.after(_:)`).
    @discardableResult
    func setSyncPaused(_ paused: Bool) async throws -> SyncState
    /// Grows `SyncState.revision` (an admin change outside this protocol, such as a user
    /// disabled in the `UserDirectory`) so every node re-reads what it acts on.
    func bumpStateRevision() async throws
    /// A secret every node shares (the access-token key when none is configured): the stored
    /// one, or `create()`'s value stored now if there is none yet (the first node wins a race).
    func sharedSecret(named name: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8]

    // MARK: Client files

    func newClientFile(userId: String) async throws -> ClientFileRecord
    func clientFile(_ ident: UInt64) async throws -> ClientFileRecord?
    func saveSubscriptions(clientFile: UInt64, version: UInt64, subscriptions: [Subscription]) async throws
    /// How many client files a user has.
    func clientFileCount(userId: String) async throws -> Int
    /// Forgets the user's least recently seen client file (that device resets when it returns).
    func forgetLeastRecentClientFile(userId: String) async throws
    /// Forgets one client file (offline longer than the client maximum offline time).
    func forgetClientFile(_ ident: UInt64) async throws
    /// Records that the client file was seen now (a bind).
    func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) async throws
    /// Records a bind of the client file now, with the server version it has integrated
    /// (`touchClientFile`, and `oldestBoundVersion` learns the version). A new client file
    /// counts as bound at the head it was made at (its bootstrap starts there).
    func clientFileBound(_ ident: UInt64, at secondsSinceEpoch: Int, serverVersion: UInt64) async throws
    /// Drops from the client file's refusal ledger what its device has every answer of
    /// (`RefusalLedger.forgetAnswered`), stored empty as none. Only a saving: a backend may
    /// leave the ledger as it is when an upload changed it meanwhile (the next BIND forgets).
    func forgetAnsweredRefusals(clientFile ident: UInt64, answeredThrough: UInt64) async throws
    /// The oldest server version any client file had at its last bind: history after it may
    /// still be asked for (`ferry_oldest_needed_version`); a lower bound, as devices move on
    /// while connected. Files from before this was recorded count as 0. Nil without client files.
    func oldestBoundVersion() async throws -> UInt64?

    // MARK: Objects and history

    /// Runs `body` in one write transaction holding the app's write lock: `body` reads the
    /// head and the objects it merges, and writes the result at the next version; everything
    /// becomes durable together when `body` returns (rolled back if it throws), and only then
    /// does this return. The feed is signalled after the commit.
    func writeTransaction<T: Sendable>(_ body: @Sendable (any SyncWriteTransaction) async throws -> T) async throws -> T
    /// One object's stored state, outside any transaction.
    func object(_ key: ObjectKey, schema: ObjectSchema) async throws -> StoredObject?
    /// The stored state of each of `keys` that exists, outside any transaction, in as few
    /// round trips as the backend can (missing keys are absent). An upload is merged on what
    /// this reads before it takes the write lock; the transaction checks it is still current.
    func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject]
    /// The objects of `schema`'s class changed after `version` (tombstones included), in
    /// version order, read in pages so memory does not grow with the history.
    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) async throws
    /// Runs `body` on a read-only snapshot of the store taken now: long reads (a new
    /// subscription set's view, a bootstrap) see one state and do not hold up writers.
    func withSnapshot<T: Sendable>(_ body: @Sendable (any SyncSnapshot) async throws -> T) async throws -> T

    /// Closes the store's connections; later calls fail.
    func close() async
}

/// The inside of `SyncStorage.writeTransaction`: reads see the state under the app's write
/// lock, writes commit together.
public protocol SyncWriteTransaction: AnyObject, Sendable {
    /// The app's head version as this transaction sees it: read under the write lock, then
    /// moved by each `write` that stored objects. The next such `write` gets `headVersion + 1`.
    var headVersion: UInt64 { get }
    func clientFile(_ ident: UInt64) async throws -> ClientFileRecord?
    /// The stored state of each of `keys` that exists (missing keys are absent).
    func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject]
    /// Writes `objects` at `headVersion + 1` (the new head) when there are any, and records
    /// `clientVersion` as the client file's acknowledged version (never lowering it). Returns
    /// the head after this write: `headVersion + 1`, or `headVersion` when `objects` is empty.
    /// May be called several times in one transaction (group commit: one upload per call, each
    /// at its own version); reads after a write see it, and every write becomes durable with
    /// the one commit.
    func write(objects: [ObjectKey: StoredObject], clientFile: UInt64, clientVersion: UInt64) async throws -> UInt64
    /// `write`, told that the keys in `absent` have no row in the store (not even a
    /// tombstone): the caller read them at this transaction's head, or proved nothing wrote
    /// them since (`RecentCommits`). A backend may insert those rows without looking for an
    /// existing one; if one exists after all, the write fails and the transaction rolls back
    /// (nothing is half-written). A backend may also ignore it.
    func write(objects: [ObjectKey: StoredObject], absent: Set<ObjectKey>, clientFile: UInt64, clientVersion: UInt64) async throws -> UInt64
    /// Adds to the client file's refusal ledger (`RefusalLedger.record`) the compensating writes
    /// of its upload acknowledged through `through`, durable with this transaction's
    /// acknowledgement; `clientFile` reads it back so. A file that is not there is left alone.
    func recordRefusals(clientFile: UInt64, through: UInt64, writes: [CompensatingWrite]) async throws
    /// Reads ahead what a group of uploads will read (their client files and objects), in as
    /// few round trips as the backend can; later reads of them come from what was read here,
    /// as changed by the transaction's writes. Optional: a backend whose reads are cheap does
    /// nothing.
    func prefetch(clientFiles: [UInt64], keys: [ObjectKey], schema: Schema) async throws
    /// A backend's SQL writes captured in its transaction `transaction` (the PostgreSQL
    /// store's SQL tables, docs/backend.md): takes them out of the inbox in this transaction,
    /// and at commit rewrites the tables' rows of `restoring` from the store (the merged
    /// state, or the state before a refused write). False when they are not there (another
    /// node integrated them already): nothing was done. A store without SQL tables throws.
    func consumeCapturedWrites(transaction: Int64, restoring: [ObjectKey]) async throws -> Bool
}

extension SyncWriteTransaction {
    public func prefetch(clientFiles: [UInt64], keys: [ObjectKey], schema: Schema) async throws {}

    public func consumeCapturedWrites(transaction: Int64, restoring: [ObjectKey]) async throws -> Bool {
        throw FerryError(.invalidArgument, "this store keeps no SQL tables, so no SQL write is captured")
    }

    public func write(objects: [ObjectKey: StoredObject], absent: Set<ObjectKey>, clientFile: UInt64, clientVersion: UInt64) async throws -> UInt64 {
        try await write(objects: objects, clientFile: clientFile, clientVersion: clientVersion)
    }
}

/// A consistent read-only view of the store at one version. The hub evaluates a new
/// subscription set's view on one, then catches up from `version`.
public protocol SyncSnapshot: AnyObject, Sendable {
    /// The head version this snapshot sees.
    var version: UInt64 { get }
    /// Every live object of a class, read in pages, in primary-key order (the same order each
    /// time on one snapshot). `body` may suspend (a streamed bootstrap waits for its client
    /// to read): the next page is read only after it returns.
    func forEachObject(schema: ObjectSchema, _ body: (FerryValue, StampedObject) async throws -> Void) async throws
    /// One page of `forEachObject`: up to `limit` live objects of a class whose encoded
    /// primary key (`ValueCodec`) sorts after `after` (nil: from the first), in that order,
    /// each with its encoded key, the cursor of the next page. The Data API pages with it.
    func objects(of schema: ObjectSchema, after: [UInt8]?, limit: Int) async throws -> [(key: FerryValue, object: StampedObject, rawKey: [UInt8])]
    /// The objects of `schema`'s class changed after `version`, in version order, read in
    /// pages; `body` may suspend.
    func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) async throws -> Void) async throws
}
