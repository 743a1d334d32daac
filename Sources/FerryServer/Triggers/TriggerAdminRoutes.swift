import FerryCore
import FerryAppConfig
import FerrySyncStorage
import Foundation
import Hummingbird

/// The admin API's triggers (same Bearer admin token as the rest of `/api/admin/v1`):
/// `GET triggers` lists each trigger of the app with its delivery state (cursor, how far
/// behind the head, deliveries, failures, pause, which node delivers it), and
/// `POST triggers/<name>/resume` resumes a paused one from where it stopped.
struct TriggerAdminRoutes {
    let admin: AdminToken
    let app: AppConfiguration
    let storage: any SyncStorage
    let store: any TriggerStorage
    let runner: TriggerRunner?
    let events: ServerEventLog

    struct TriggerJSON: ResponseEncodable {
        let name: String
        let `class`: String
        let operation_types: [String]
        let match: String?
        let url: String
        let disabled: Bool
        /// Not yet delivered by any node (no state yet).
        let started: Bool
        let cursor: UInt64?
        let behind: UInt64?
        let delivered: Int64
        let failures: Int
        let paused: Bool
        let last_error: String?
        let node: String?
    }

    struct ListJSON: ResponseEncodable {
        let head: UInt64
        let triggers: [TriggerJSON]
    }

    func add(to router: Router<ServerRequestContext>) {
        let group = router.group("api/admin/v1/triggers")
        group.get { request, context -> ListJSON in
            try admin.authorize(request, context)
            let head = try await storage.syncState().headVersion
            let states = Dictionary(try await store.triggerStates().map { ($0.name, $0) }) { a, _ in a }
            let now = WallClock.system.millisecondsSinceEpoch()
            return ListJSON(head: head, triggers: app.triggers.map { t in
                let s = states[t.name]
                return TriggerJSON(name: t.name, class: t.className, operation_types: t.operations.map(\.rawValue).sorted(), match: t.match, url: t.url,
                                   disabled: t.disabled, started: s != nil, cursor: s?.cursor, behind: s.map { head > $0.cursor ? head - $0.cursor : 0 },
                                   delivered: s?.delivered ?? 0, failures: s?.failures ?? 0, paused: s?.paused ?? false, last_error: s?.lastError,
                                   node: s.flatMap { $0.leaseUntilMilliseconds >= now ? $0.holder : nil })
            })
        }
        group.post(":name/resume") { request, context -> HTTPResponse.Status in
            try admin.authorize(request, context)
            let name = context.parameters.get("name") ?? ""
            guard app.triggers.contains(where: { $0.name == name }) else {
                throw APIError(status: .notFound, code: "TriggerNotFound", message: "no trigger '\(excerpt(name, limit: 64))' in the app")
            }
            guard try await store.resumeTrigger(name) else {
                throw APIError(status: .conflict, code: "TriggerNotStarted", message: "trigger '\(name)' has delivered nothing yet: there is nothing to resume")
            }
            // This node's task looks at once; another node's at its next renewal.
            runner?.wake(name)
            await events.record(kind: "trigger_resumed", userId: "", message: "trigger '\(name)' resumed by an admin")
            return .noContent
        }
    }
}
