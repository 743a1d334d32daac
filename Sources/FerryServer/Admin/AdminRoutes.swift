import FerryAuth
import Foundation
import Hummingbird

/// The admin HTTP API under `/api/admin/v1`, protected by the `FERRY_ADMIN_TOKEN` secret
/// (Bearer). Without that secret the admin API is disabled (every call is 403).
struct AdminRoutes {
    let token: String?
    let directory: UserDirectory
    let hub: SyncHub
    let events: ServerEventLog

    struct UserJSON: ResponseEncodable {
        struct IdentityJSON: Encodable { var provider_type: String; var id: String }
        var id: String
        var identities: [IdentityJSON]
        var disabled: Bool
    }
    /// `connections`: the sync WebSocket connections open now (what multiplexing saves).
    struct StatusJSON: ResponseEncodable { var sync_enabled: Bool; var connections: Int }
    struct LogsJSON: ResponseEncodable { var entries: [ServerEventLog.Entry] }

    func add(to router: Router<ServerRequestContext>) {
        let admin = router.group("api/admin/v1")
        admin.get("users") { request, context -> [UserJSON] in
            try authorize(request)
            return try await directory.allUsers().map {
                UserJSON(id: $0.id, identities: $0.identities.map { .init(provider_type: $0.provider, id: $0.providerUserId) }, disabled: $0.disabled)
            }
        }
        admin.post("users/:id/disable") { request, context -> HTTPResponse.Status in
            try authorize(request)
            let id = try userId(context)
            try await directory.setDisabled(userId: id, true)
            try await hub.userDisabled(id)
            await events.record(kind: "user_disabled", userId: id, message: "user disabled by an admin")
            return .noContent
        }
        admin.post("users/:id/enable") { request, context -> HTTPResponse.Status in
            try authorize(request)
            let id = try userId(context)
            try await directory.setDisabled(userId: id, false)
            await events.record(kind: "user_enabled", userId: id, message: "user enabled by an admin")
            return .noContent
        }
        admin.get("sync") { request, _ -> StatusJSON in
            try authorize(request)
            // From the hub's status, not the hub: an overloaded hub must not keep this waiting.
            return StatusJSON(sync_enabled: hub.status.syncEnabled, connections: hub.status.connections)
        }
        admin.post("sync/terminate") { request, _ -> StatusJSON in
            try authorize(request)
            try await hub.terminateSync()
            return StatusJSON(sync_enabled: false, connections: hub.status.connections)
        }
        admin.post("sync/enable") { request, _ -> StatusJSON in
            try authorize(request)
            try await hub.enableSync()
            return StatusJSON(sync_enabled: true, connections: hub.status.connections)
        }
        admin.get("logs") { request, _ -> LogsJSON in
            try authorize(request)
            let limit = request.uri.queryParameters.get("limit").flatMap { Int($0) } ?? 100
            return LogsJSON(entries: await events.recent(limit: min(max(limit, 0), 1000)))
        }
    }

    private func userId(_ context: ServerRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty else {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "a user id is required")
        }
        return id
    }

    private func authorize(_ request: Request) throws { try AdminToken(token: token).authorize(request) }
}
