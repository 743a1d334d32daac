import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation

/// The expensive part of a QUERY: compiling the new subscription set, reading from a snapshot
/// of the store what enters and leaves the session's view, and streaming that bootstrap to
/// the client. It runs beside the hub (the storage backend reads in pages off Swift's
/// cooperative pool), so one user's large set never holds up other users' uploads.
///
/// Two passes: the first reads the snapshot, judges the set (its deadline, the connection),
/// encodes the bootstrap and spools it (`BootstrapSpool`: in memory up to one message, else
/// an unlinked temporary file), so its exact size is known; then the hub installs the view
/// (`Install`), and the second pass sends each spooled DOWNLOAD, saying how many bytes are
/// still to come (exact progress), and waits while more than a few messages are queued for
/// the client. Memory stays at a few messages whatever the view's size. If the spool failed
/// (a full disk), the second pass reads and encodes the snapshot again instead. The hub then
/// catches up from the snapshot's version.
struct ViewEvaluation: @unchecked Sendable {
    let session: UInt64
    let subscriptions: [Subscription]
    let setVersion: UInt64
    let user: UserContext
    let app: AppConfiguration
    let schema: Schema
    let limits: SyncLimits
    let oldView: SessionView
    /// The client's last server version (0: it has nothing yet).
    let since: UInt64
    /// Whether the set changed (or the client is new): the whole view is compared, not only
    /// what changed since `since`.
    let setChanged: Bool
    let outbox: ConnectionOutbox
    /// Where a bootstrap larger than one message is spooled (nil: `TMPDIR`, else `/tmp`).
    var spoolDirectory: String? = nil

    enum Outcome: @unchecked Sendable {
        case rejected(String)
        /// The bootstrap of the new view was sent, as of the snapshot's version.
        case sent(SessionView, UInt64)
    }

    /// Called between the passes with the new view and the snapshot's version: the hub saves
    /// the set and installs the view, and returns the acknowledged client version the
    /// bootstrap carries, or nil when nobody wants it any more.
    typealias Install = @Sendable (SessionView, UInt64) async throws -> UInt64?

    /// Why an evaluation stopped without an outcome: nobody is left to receive it.
    struct ConnectionGone: Error {
        /// Whether the view was installed (the set saved) before the connection went away.
        let afterInstall: Bool
    }

    /// Objects between two checks of the deadline and of the connection.
    private static let checkEvery = 256
    /// Bytes queued for the client past which the second pass waits for it to read.
    static var streamQueueBytes: Int { 4 * SyncHub.downloadChunkBytes }

    /// Compiles the set, measures its bootstrap on a snapshot, has the hub install it, then
    /// streams it.
    func run(storage: any SyncStorage, install: @escaping Install) async throws -> Outcome {
        let newView: SessionView
        switch SessionView.make(subscriptions, user: user, app: app, schema: schema, limits: limits) {
        case .failure(let e): return .rejected(e.message)
        case .success(let v): newView = v
        }
        let evaluation = self
        do {
            return try await storage.withSnapshot { snapshot in
                let spool = try await evaluation.measure(newView, from: snapshot)
                guard let acknowledged = try await install(newView, snapshot.version) else { throw ConnectionGone(afterInstall: false) }
                try await evaluation.stream(newView, from: snapshot, spool: spool, acknowledged: acknowledged)
                return .sent(newView, snapshot.version)
            }
        } catch let e as SubscriptionError {
            return .rejected(e.message)
        }
    }

    /// The first pass: every DOWNLOAD of the bootstrap, encoded and spooled, within the deadline.
    private func measure(_ newView: SessionView, from snapshot: any SyncSnapshot) async throws -> BootstrapSpool {
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(Int64(limits.viewEvaluationSeconds * 1000)))
        var visited = 0
        let outbox = self.outbox, limits = self.limits
        var chunks = DownloadChunker()
        let spool = BootstrapSpool(directory: spoolDirectory)
        try await visit(newView, from: snapshot, each: {
            visited += 1
            guard visited % Self.checkEvery == 0 else { return }
            if outbox.isClosed { throw ConnectionGone(afterInstall: false) }
            if ContinuousClock.now > deadline { throw SubscriptionError("the subscription set took longer than \(Int(limits.viewEvaluationSeconds)) s to evaluate; make its queries narrower") }
        }) { i in
            if let c = chunks.add(i) { spool.append(c) }
        }
        if let c = chunks.cut() { spool.append(c) }
        return spool
    }

    /// The second pass: the spooled messages, or (the spool failed) the same instructions
    /// encoded again and cut the same way, sent as they are cut.
    private func stream(_ newView: SessionView, from snapshot: any SyncSnapshot, spool: BootstrapSpool, acknowledged: UInt64) async throws {
        let (session, setVersion, outbox, version) = (self.session, self.setVersion, self.outbox, snapshot.version)
        let chunkSizes = spool.sizes
        guard !chunkSizes.isEmpty else {
            outbox.send(.download(session: session, serverVersion: version, uploadAcknowledged: acknowledged, subscriptionVersion: setVersion,
                                  downloadableBytes: 0, isLastInBatch: true, changesets: []))
            return
        }
        var remaining = UInt64(chunkSizes.reduce(0, +))
        var sent = 0
        func send(_ chunk: [UInt8]) async throws {
            // Identical input cut identically: a difference means the snapshot moved, which
            // a snapshot never does; stop rather than lie about the progress.
            guard sent < chunkSizes.count, chunk.count == chunkSizes[sent] else {
                throw FerryError(.internal, "the bootstrap's second pass differs from its first (chunk \(sent))")
            }
            await outbox.waitForRoom(atMost: Self.streamQueueBytes)
            if outbox.isClosed { throw ConnectionGone(afterInstall: true) }
            remaining -= UInt64(chunk.count)
            outbox.send(.download(session: session, serverVersion: version, uploadAcknowledged: acknowledged, subscriptionVersion: setVersion,
                                  downloadableBytes: remaining, isLastInBatch: sent == chunkSizes.count - 1,
                                  changesets: [DownloadChangeset(serverVersion: version, originFileIdent: 0, changeset: chunk)]))
            sent += 1
        }
        if spool.isUsable {
            try await spool.forEach { try await send($0) }
        } else {
            outbox.logger.warning("the bootstrap of session \(session) could not be spooled (\(spool.failure ?? "")): its view is read and encoded a second time")
            var chunks = DownloadChunker()
            try await visit(newView, from: snapshot, each: {}) { i in
                if let c = chunks.add(i) { try await send(c) }
            }
            if let c = chunks.cut() { try await send(c) }
        }
        guard sent == chunkSizes.count else { throw FerryError(.internal, "the bootstrap's second pass sent \(sent) of \(chunkSizes.count) messages") }
    }

    /// Every instruction of the bootstrap, in one order: for each subscribed or previously
    /// subscribed class, state for what is in the new view and new to the client (entered, or
    /// changed since it last synced), an erase for what left it.
    /// `each` runs for every object read (the first pass checks its deadline there).
    private func visit(_ newView: SessionView, from snapshot: any SyncSnapshot, each: () throws -> Void,
                       _ emit: (Instruction) async throws -> Void) async throws {
        let app = self.app, since = self.since, oldView = self.oldView
        let classes = Set(newView.classes).union(oldView.classes)
        for name in classes.sorted() {
            guard let os = schema.objectSchema(named: name) else { continue }
            if since == 0 || setChanged {
                try await snapshot.forEachObject(schema: os) { key, o in
                    try each()
                    let inNew = newView.contains(o.values, of: os)
                    let inOld = since > 0 && oldView.contains(o.values, of: os)
                    if inNew && !inOld { try await emit(o.fullState(os)) }
                    else if !inNew && inOld { try await emit(.erase(table: os.name, key: key)) }
                }
            }
            if since > 0 {
                try await snapshot.changes(since: since, schema: os) { c in
                    try each()
                    if let i = newView.catchUp(c, of: os, app: app) { try await emit(i) }
                }
            }
        }
    }
}
