import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation

/// The expensive part of a QUERY: compiling the new subscription set and reading, from a
/// snapshot of the store, what enters and leaves the session's view. It runs beside the hub
/// (the storage backend runs long scans off Swift's cooperative pool), so one user's large
/// set never holds up other users' uploads; it stops when its connection goes away or its
/// time is up. The hub then catches up from the snapshot's version (what was committed
/// meanwhile) and installs the view.
struct ViewEvaluation: @unchecked Sendable {
    let session: UInt64
    let subscriptions: [Subscription]
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

    enum Outcome: @unchecked Sendable {
        case rejected(String)
        /// The new view, its bootstrap, and the version of the snapshot it was read from.
        case ready(SessionView, DownloadBatch, UInt64)
    }

    /// Why an evaluation stopped without an outcome: nobody is left to receive it.
    struct ConnectionGone: Error {}

    /// Objects between two checks of the deadline and of the connection.
    private static let checkEvery = 256

    /// Compiles the set, then reads the view from a snapshot of the store (the backend runs
    /// long scans off the cooperative pool).
    func run(storage: any SyncStorage) async throws -> Outcome {
        let newView: SessionView
        switch SessionView.make(subscriptions, user: user, app: app, schema: schema, limits: limits) {
        case .failure(let e): return .rejected(e.message)
        case .success(let v): newView = v
        }
        let evaluation = self
        do {
            return try await storage.withSnapshot { snapshot in try await evaluation.read(newView, from: snapshot) }
        } catch let e as SubscriptionError {
            return .rejected(e.message)
        }
    }

    private func read(_ newView: SessionView, from snapshot: any SyncSnapshot) async throws -> Outcome {
        let deadline = Date().addingTimeInterval(limits.viewEvaluationSeconds)
        var visited = 0
        let outbox = self.outbox, limits = self.limits, app = self.app, since = self.since, oldView = self.oldView
        func checkpoint() throws {
            visited += 1
            guard visited % Self.checkEvery == 0 else { return }
            if outbox.isClosed { throw ConnectionGone() }
            if Date() > deadline { throw SubscriptionError("the subscription set took longer than \(Int(limits.viewEvaluationSeconds)) s to evaluate; make its queries narrower") }
        }
        var batch = DownloadBatch(session: session)
        // Everything of a subscribed or previously subscribed class: state for what is in the
        // new view and new to the client (entered, or changed since it last synced), an erase
        // for what left it.
        let classes = Set(newView.classes).union(oldView.classes)
        for name in classes.sorted() {
            guard let os = schema.objectSchema(named: name) else { continue }
            if since == 0 || setChanged {
                try await snapshot.forEachObject(schema: os) { key, o in
                    try checkpoint()
                    let inNew = newView.contains(o.values, of: os)
                    let inOld = since > 0 && oldView.contains(o.values, of: os)
                    if inNew && !inOld { batch.add(o.fullState(os)) }
                    else if !inNew && inOld { batch.add(.erase(table: os.name, key: key)) }
                }
            }
            if since > 0 {
                try await snapshot.changes(since: since, schema: os) { c in
                    try checkpoint()
                    if let i = newView.catchUp(c, of: os, app: app) { batch.add(i) }
                }
            }
        }
        return .ready(newView, batch, snapshot.version)
    }
}
