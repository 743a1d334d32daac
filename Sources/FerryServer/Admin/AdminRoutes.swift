import FerryAuth
import FerrySyncStorage
import Foundation
import Hummingbird

/// The admin HTTP API under `/api/admin/v1`, protected by the `FERRY_ADMIN_TOKEN` secret
/// (Bearer). Without that secret the admin API is disabled (every call is 403).
struct AdminRoutes {
    let admin: AdminToken
    let directory: UserDirectory
    let hub: SyncHub
    let events: ServerEventLog

    struct UserJSON: ResponseEncodable {
        struct IdentityJSON: Encodable { var provider_type: String; var id: String }
        var id: String
        var identities: [IdentityJSON]
        var disabled: Bool
    }
    /// `state`: "enabled", "paused" (a resume carries on with the same sync identity) or
    /// "terminated" (an enable starts a new one); `sync_enabled`: whether it is "enabled".
    /// `connections`: the sync WebSocket connections open now (what multiplexing saves).
    struct StatusJSON: ResponseEncodable {
        var state: String
        var sync_enabled: Bool
        var connections: Int
        init(mode: SyncState.Mode, connections: Int) {
            state = mode.rawValue
            sync_enabled = mode == .enabled
            self.connections = connections
        }
    }
    struct LogsJSON: ResponseEncodable { var entries: [ServerEventLog.Entry] }

    func add(to router: Router<ServerRequestContext>) {
        let group = router.group("api/admin/v1")
        group.get("users") { request, context -> [UserJSON] in
            try admin.authorize(request, context)
            return try await directory.allUsers().map {
                UserJSON(id: $0.id, identities: $0.identities.map { .init(provider_type: $0.provider, id: $0.providerUserId) }, disabled: $0.disabled)
            }
        }
        group.post("users/:id/disable") { request, context -> HTTPResponse.Status in
            try admin.authorize(request, context)
            let id = try userId(context)
            try await directory.setDisabled(userId: id, true)
            try await hub.admin.userDisabled(id)
            await events.record(kind: "user_disabled", userId: id, message: "user disabled by an admin")
            return .noContent
        }
        group.post("users/:id/enable") { request, context -> HTTPResponse.Status in
            try admin.authorize(request, context)
            let id = try userId(context)
            try await directory.setDisabled(userId: id, false)
            await events.record(kind: "user_enabled", userId: id, message: "user enabled by an admin")
            return .noContent
        }
        group.get("sync") { request, context -> StatusJSON in
            try admin.authorize(request, context)
            // From the hub's status, not the hub: an overloaded hub must not keep this waiting.
            return StatusJSON(mode: hub.status.mode, connections: hub.status.connections)
        }
        // Each answers with the state after the action (as stored, which every node follows),
        // or 409 when the action does not apply to the state sync is in.
        group.post("sync/terminate") { request, context -> StatusJSON in
            try admin.authorize(request, context)
            return StatusJSON(mode: try await syncAction { try await hub.admin.terminate() }, connections: hub.status.connections)
        }
        group.post("sync/enable") { request, context -> StatusJSON in
            try admin.authorize(request, context)
            return StatusJSON(mode: try await syncAction { try await hub.admin.enable() }, connections: hub.status.connections)
        }
        group.post("sync/pause") { request, context -> StatusJSON in
            try admin.authorize(request, context)
            return StatusJSON(mode: try await syncAction { try await hub.admin.pause() }, connections: hub.status.connections)
        }
        group.post("sync/resume") { request, context -> StatusJSON in
            try admin.authorize(request, context)
            return StatusJSON(mode: try await syncAction { try await hub.admin.resume() }, connections: hub.status.connections)
        }
        group.get("logs") { request, context -> LogsJSON in
            try admin.authorize(request, context)
            let limit = request.uri.queryParameters.get("limit").flatMap { Int($0) } ?? 100
            return LogsJSON(entries: await events.recent(limit: min(max(limit, 0), 1000)))
        }
    }

    /// Runs an admin action on the sync state; a conflict is 409 `SyncStateConflict` with its
    /// message and the state sync is in.
    private func syncAction(_ action: () async throws -> SyncState) async throws -> SyncState.Mode {
        do {
            return try await action().mode
        } catch let conflict as SyncAdministration.Conflict {
            throw APIError(status: .conflict, code: "SyncStateConflict", message: "\(conflict.message) (sync is \(conflict.mode.rawValue))")
        }
    }

    private func userId(_ context: ServerRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty else {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "a user id is required")
        }
        return id
    }
}
