import Dispatch
import FerryAppConfig
import FerryCore
import Foundation

/// The expensive part of a QUERY: compiling the new subscription set and reading, from a
/// snapshot of the store, what enters and leaves the session's view. It runs on a thread of
/// its own (not on the hub, not on Swift's cooperative pool), so one user's large set never
/// holds up other users' uploads; it stops when its connection goes away or its time is up.
/// The hub then catches up from `snapshotVersion` (what was committed meanwhile) and installs
/// the view.
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
        case ready(SessionView, DownloadBatch)
    }

    /// Why an evaluation stopped without an outcome: nobody is left to receive it.
    struct ConnectionGone: Error {}

    /// Objects between two checks of the deadline and of the connection.
    private static let checkEvery = 256

    /// Threads for evaluations, apart from the hub and the cooperative pool.
    private static let queue = DispatchQueue(label: "ferry.view-evaluation", attributes: .concurrent)

    /// Runs `evaluate` on the evaluation queue.
    func run(storage: SyncStorage) async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            Self.queue.async { continuation.resume(with: Result { try evaluate(storage: storage) }) }
        }
    }

    func evaluate(storage: SyncStorage) throws -> Outcome {
        let newView: SessionView
        switch SessionView.make(subscriptions, user: user, app: app, schema: schema, limits: limits) {
        case .failure(let e): return .rejected(e.message)
        case .success(let v): newView = v
        }
        let deadline = Date().addingTimeInterval(limits.viewEvaluationSeconds)
        var visited = 0
        func checkpoint() throws {
            visited += 1
            guard visited % Self.checkEvery == 0 else { return }
            if outbox.isClosed { throw ConnectionGone() }
            if Date() > deadline { throw SubscriptionError("the subscription set took longer than \(Int(limits.viewEvaluationSeconds)) s to evaluate; make its queries narrower") }
        }
        var batch = DownloadBatch(session: session)
        do {
            try storage.withSnapshot { snapshot in
                // Everything of a subscribed or previously subscribed class: state for what is
                // in the new view and new to the client (entered, or changed since it last
                // synced), an erase for what left it.
                let classes = Set(newView.classes).union(oldView.classes)
                for name in classes.sorted() {
                    guard let os = schema.objectSchema(named: name) else { continue }
                    if since == 0 || setChanged {
                        try snapshot.forEachObject(schema: os) { key, o in
                            try checkpoint()
                            let inNew = newView.contains(o.values, of: os)
                            let inOld = since > 0 && oldView.contains(o.values, of: os)
                            if inNew && !inOld { batch.add(o.fullState(os)) }
                            else if !inNew && inOld { batch.add(.erase(table: os.name, key: key)) }
                        }
                    }
                    if since > 0 {
                        try snapshot.changes(since: since, schema: os) { c in
                            try checkpoint()
                            if let i = newView.catchUp(c, of: os, app: app) { batch.add(i) }
                        }
                    }
                }
            }
        } catch let e as SubscriptionError {
            return .rejected(e.message)
        }
        return .ready(newView, batch)
    }
}
