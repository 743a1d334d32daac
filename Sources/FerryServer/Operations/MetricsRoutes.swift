import FerrySyncStorage
import Hummingbird

/// `GET /metrics`: the Prometheus text exposition. Behind the admin token on the main port
/// (on the `--admin-port` listener instead when there is one); on `--metrics-port` open (that listener is bound to loopback unless configured otherwise).
struct MetricsRoutes: Sendable {
    let telemetry: SyncTelemetry
    let storage: any SyncStorage
    let database: (@Sendable () -> DatabaseGauges)?

    /// Behind the admin token: on the main port, or on the admin listener when there is one.
    func add(to router: Router<ServerRequestContext>, admin: AdminToken) {
        router.get("metrics") { request, context -> Response in
            try admin.authorize(request, context)
            return await scrape()
        }
    }

    /// Open, on the `--metrics-port` listener.
    func addOpen(to router: Router<some RequestContext>) {
        router.get("metrics") { _, _ -> Response in await scrape() }
    }

    func scrape() async -> Response {
        // The head from the store (what every node agrees on); absent if the store is down.
        let head = try? await storage.syncState().headVersion
        // Without client files nothing older than the head is needed.
        let oldest: UInt64?
        do { oldest = try await storage.oldestBoundVersion() ?? head } catch { oldest = nil }
        telemetry.metrics.refresh(live: telemetry.live.counts, headVersion: head, oldestNeededVersion: oldest, database: database?())
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: telemetry.metrics.render())))
    }
}
