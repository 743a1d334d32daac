import FerryCore
import FerryAppConfig
import FerryAuth
import FerrySyncStorage
import Foundation
import Hummingbird

/// The admin API's operations part under `/api/admin/v1` (issue 14; the contract the console
/// is built on): this node's counters, the cluster's devices, each user's sync log, the
/// rejected writes, user deletion and session revocation, and a read-only view of the app.
/// Same Bearer admin token as `AdminRoutes`.
struct AdminOperationsRoutes {
    let admin: AdminToken
    let directory: any UserDirectory
    let hub: SyncHub
    let telemetry: SyncTelemetry
    let operations: any OperationsStorage
    let events: ServerEventLog
    /// How long a node's published connections count as live (`LiveConnectionPublisher`).
    let connectionFreshness: Duration
    let settings: AdminSettings

    /// How long a read waits for this node's queued sync log entries to be written first.
    static let flushWait: Duration = .seconds(2)

    func add(to router: Router<ServerRequestContext>) {
        let group = router.group("api/admin/v1")
        group.get("stats") { request, context -> StatsJSON in
            try admin.authorize(request, context)
            // From the telemetry and the hub's status: never waits on the hub or the store.
            let totals = telemetry.metrics.snapshot
            let counts = telemetry.live.counts
            return StatsJSON(node: telemetry.node, state: hub.status.mode.rawValue, sync_enabled: hub.status.syncEnabled, connections: counts.connections,
                             sessions: counts.sessions.values.reduce(0, +), uploads_total: totals.uploads, downloads_total: totals.downloads,
                             upload_bytes_total: totals.uploadBytes, download_bytes_total: totals.downloadBytes,
                             compensating_writes_total: totals.compensatingWrites, client_resets_total: totals.clientResets,
                             bootstraps_total: totals.bootstraps)
        }
        group.get("devices") { request, context -> DevicesJSON in
            try admin.authorize(request, context)
            // This node's from memory (exact, at once); the other nodes' as they last published.
            var records = telemetry.live.records(node: telemetry.node)
            let fresh = SyncLogRecorder.nowMilliseconds() - Int64(connectionFreshness.components.seconds * 1000)
            do {
                records += try await operations.liveConnections(freshSinceMilliseconds: fresh).filter { $0.node != telemetry.node }
            } catch {
                throw APIError(status: .serviceUnavailable, code: "ServiceUnavailable", message: "cannot read the other nodes' connections: \(error)")
            }
            return DevicesJSON(devices: records.map {
                DeviceJSON(user_id: $0.userId, node: $0.node, connection_id: $0.connectionId, client_file: $0.clientFile, sdk: $0.sdk,
                           connected_since: ISOTime.string(milliseconds: $0.connectedSinceMilliseconds), bytes_up: $0.bytesUp,
                           bytes_down: $0.bytesDown, sessions: $0.sessions)
            })
        }
        group.get("users/:id/sync-log") { request, context -> SyncLogJSON in
            try admin.authorize(request, context)
            var query = try page(request)
            query.userId = try userId(context)
            let p = request.uri.queryParameters
            if let kinds = p.get("kind"), !kinds.isEmpty {
                query.kinds = try kinds.split(separator: ",").map {
                    guard let k = SyncLogKind(rawValue: String($0)) else {
                        throw APIError(status: .badRequest, code: "InvalidParameter",
                                       message: "unknown kind '\($0)'; kinds: \(SyncLogKind.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    return k
                }
            }
            query.sinceMilliseconds = try time(p.get("since"), "since")
            query.untilMilliseconds = try time(p.get("until"), "until")
            let (found, next) = try await read(query)
            return SyncLogJSON(entries: found.map {
                EntryJSON(id: $0.id, time: ISOTime.string(milliseconds: $0.timeMilliseconds), kind: $0.kind.rawValue, user_id: $0.userId,
                          node: $0.node, connection_id: $0.connectionId, message: $0.message, details: Self.details($0))
            }, next: next)
        }
        group.get("rejected-writes") { request, context -> RejectedListJSON in
            try admin.authorize(request, context)
            var query = try page(request)
            query.kinds = [.compensatingWrite]
            query.userId = request.uri.queryParameters.get("user").flatMap { $0.isEmpty ? nil : $0 }
            let (found, next) = try await read(query)
            return RejectedListJSON(entries: found.map { e in
                let d = Self.details(e)
                return RejectedJSON(id: e.id, time: ISOTime.string(milliseconds: e.timeMilliseconds), user_id: e.userId,
                                    object_type: d["object_type"] ?? "", primary_key: d["primary_key"] ?? "", reason: d["reason"] ?? e.message,
                                    rule: d["rule"] ?? CompensatingWriteRule.queryView.rawValue, role: d["role"])
            }, next: next)
        }
        group.delete("users/:id") { request, context -> HTTPResponse.Status in
            try admin.authorize(request, context)
            let id = try userId(context)
            guard try await directory.user(id: id) != nil else {
                throw APIError(status: .notFound, code: "UserNotFound", message: "no user \(id)")
            }
            try await directory.deleteUser(id: id)
            try await hub.admin.userDeleted(id)
            await events.record(kind: "user_deleted", userId: id, message: "user deleted by an admin")
            return .noContent
        }
        group.post("users/:id/revoke-sessions") { request, context -> HTTPResponse.Status in
            try admin.authorize(request, context)
            let id = try userId(context)
            guard try await directory.user(id: id) != nil else {
                throw APIError(status: .notFound, code: "UserNotFound", message: "no user \(id)")
            }
            try await directory.revokeSessions(userId: id, validAfter: WallClock.system.secondsSinceEpoch())
            try await hub.admin.sessionsRevoked(id)
            await events.record(kind: "sessions_revoked", userId: id, message: "sessions revoked by an admin")
            return .noContent
        }
        group.get("settings") { request, context -> Response in
            try admin.authorize(request, context)
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: settings.json)))
        }
    }

    /// Reads a page of the sync log after this node's queued entries are written, and the
    /// `before` of the next page (nil when this one is the last: one entry more is read to know).
    private func read(_ query: SyncLogQuery) async throws -> (entries: [SyncLogEntry], next: Int64?) {
        await telemetry.log?.flush(within: Self.flushWait)
        var probe = query
        probe.limit = query.limit + 1
        let found: [SyncLogEntry]
        do { found = try await operations.syncLog(probe) } catch {
            throw APIError(status: .serviceUnavailable, code: "ServiceUnavailable", message: "cannot read the sync log: \(error)")
        }
        let page = Array(found.prefix(query.limit))
        return (page, found.count > query.limit ? page.last?.id : nil)
    }

    /// `limit` (1…1000, default 100) and `before` (an entry id).
    private func page(_ request: Request) throws -> SyncLogQuery {
        let p = request.uri.queryParameters
        var query = SyncLogQuery()
        if let l = p.get("limit") {
            guard let n = Int(l), n > 0 else { throw APIError(status: .badRequest, code: "InvalidParameter", message: "limit must be a positive number") }
            query.limit = min(n, 1000)
        }
        if let b = p.get("before"), !b.isEmpty {
            guard let n = Int64(b) else { throw APIError(status: .badRequest, code: "InvalidParameter", message: "before must be an entry id") }
            query.beforeId = n
        }
        return query
    }

    private func time(_ text: String?, _ name: String) throws -> Int64? {
        guard let text, !text.isEmpty else { return nil }
        guard let ms = ISOTime.milliseconds(text) else {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "\(name) must be an ISO 8601 time such as 2026-11-26T13:00:00Z")
        }
        return ms
    }

    private func userId(_ context: ServerRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), !id.isEmpty else {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "a user id is required")
        }
        return id
    }

    /// The entry's details as the JSON the server stored; text that is not JSON (an entry
    /// written by an older server, or damaged) is shown as the string it is, never hidden.
    static func details(_ e: SyncLogEntry) -> JSON {
        do { return try JSON.parse(Array(e.details.utf8)) } catch { return .string(e.details) }
    }
}

extension JSON {
    /// A string member of an object.
    subscript(key: String) -> String? {
        guard case .object(let members) = self, let v = members.first(where: { $0.0 == key })?.1, case .string(let s) = v else { return nil }
        return s
    }
}
