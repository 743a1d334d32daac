import FerryAuth
import FerryCore
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// The sync endpoint: `GET /api/client/v2.0/app/<app id>/realm-sync` upgraded to a WebSocket
/// with the subprotocol `ferry-sync.1` and the user's access token as a Bearer header. One
/// connection carries every session of that user (docs/protocol.md); `SyncSocket` runs it.
///
/// A refused upgrade is answered with a status that says why, and a JSON body like the other
/// API errors: 404 for another path or app, 400 without the subprotocol, 401 without a valid
/// token (the client then refreshes its access token). The answer goes out through the
/// connection's `ConnectionGuard`, as Hummingbird would answer every refusal 400 with no body.
struct SyncRoutes {
    static let subprotocol = "ferry-sync.1"
    let appId: String
    let auth: AuthService
    let hub: SyncHub
    let limits: ConnectionLimits
    let budget: InboundBudget
    /// Every connection's queued bytes together (`ConnectionLimits.maxQueuedBytesTotal`).
    let outboxBudget: OutboxBudget
    let quotas: UserQuotas
    let logger: Logger
    let telemetry: SyncTelemetry?
    /// The header a client names its SDK and host in (`ferry/1.2.0 linux-x86_64`); optional,
    /// older clients send none.
    static let sdkHeader = HTTPField.Name("X-Ferry-SDK")!
    /// The optional messages a client understands (`write-rules`: WRITE_RULES after each BIND,
    /// SPEC F-PRECHECK); a client that sends none gets none of them.
    static let featuresHeader = HTTPField.Name(ProtocolFeatures.header)!

    init(appId: String, auth: AuthService, hub: SyncHub, limits: ConnectionLimits, userLimits: SyncLimits, logger: Logger,
         telemetry: SyncTelemetry? = nil) {
        self.telemetry = telemetry
        self.appId = appId
        self.auth = auth
        self.hub = hub
        self.limits = limits
        self.budget = InboundBudget(limit: limits.maxInboundBytes)
        self.outboxBudget = OutboxBudget(limit: limits.maxQueuedBytesTotal, metrics: telemetry?.metrics)
        self.quotas = UserQuotas(limits: userLimits)
        self.logger = logger
    }

    func shouldUpgrade(_ request: HTTPRequest, channel: any Channel) async -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        let user: User
        do { user = try await accept(request) } catch {
            await refuse(error, on: channel)
            return .dontUpgrade
        }
        let socket = SyncSocket(hub: hub, limits: limits, budget: budget, outboxBudget: outboxBudget, quotas: quotas, logger: logger, telemetry: telemetry)
        // Bounded: it is stored and shown to operators.
        let sdk = request.headerFields[Self.sdkHeader].map { excerpt($0, limit: 200) }
        let writeRules = ProtocolFeatures.parse(request.headerFields[Self.featuresHeader] ?? "").contains(ProtocolFeatures.writeRules)
        // What this server accepts from any client (`ProtocolFeatures`).
        return .upgrade([.secWebSocketProtocol: Self.subprotocol, Self.featuresHeader: ProtocolFeatures.refusalReplay]) { inbound, outbound, _ in
            await socket.run(user: user.context, sdk: sdk, sendsWriteRules: writeRules, frames: InboundFrames(stream: inbound)) {
                try await outbound.write(.binary($0))
            }
        }
    }

    /// The user of an acceptable upgrade request.
    private func accept(_ request: HTTPRequest) async throws(APIError) -> User {
        let path = (request.path ?? "").split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 7, parts[0...4].elementsEqual(["", "api", "client", "v2.0", "app"]), parts[6] == "realm-sync" else {
            throw APIError(status: .notFound, code: "NotFound", message: "no sync endpoint at \(path.prefix(200))")
        }
        guard parts[5] == appId else {
            throw APIError(status: .notFound, code: "AppNotFound", message: "no app with that id is served here")
        }
        let offered = (request.headerFields[.secWebSocketProtocol] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard offered.contains(Self.subprotocol) else {
            throw APIError(status: .badRequest, code: "UnsupportedProtocol",
                           message: "the client offers sync protocol(s) \(offered.prefix(8)); this server speaks \(Self.subprotocol)")
        }
        guard let header = request.headerFields[.authorization], header.hasPrefix("Bearer ") else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the sync connection needs an Authorization: Bearer header")
        }
        do {
            let user = try await auth.authenticate(accessToken: String(header.dropFirst(7)))
            telemetry?.metrics.authenticated(provider: "access-token", success: true)
            return user
        } catch let e as AuthError {
            telemetry?.metrics.authenticated(provider: "access-token", success: false)
            throw APIError(e)
        } catch {
            // The user directory cannot be read (a node that lost its database): try again.
            // The details stay in the log (issue 22, point 8).
            let id = CorrelationId.make()
            logger.error("cannot check an access token: error id \(id): \(error)")
            throw APIError(status: .serviceUnavailable, code: "ServiceUnavailable", message: "cannot check the access token now; try again (error id \(id))")
        }
    }

    private func refuse(_ error: APIError, on channel: any Channel) async {
        let body = "{\"error\":\(jsonString(error.message)),\"error_code\":\(jsonString(error.code))}"
        let response = RawHTTPResponse.make(status: error.status.code, reason: error.status.reasonPhrase,
                                            contentType: "application/json", body: body)
        // The channel may have closed meanwhile: the refusal then has nobody to reach.
        try? await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.handler(type: ConnectionGuard.self).answerRefusedUpgrade(response)
        }.get()
    }
}
