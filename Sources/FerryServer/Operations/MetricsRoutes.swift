import FerrySyncStorage
import Hummingbird

/// `GET /metrics`: the Prometheus text exposition. On the main port behind the admin token;
/// on `--metrics-port` open (that listener is bound to loopback unless configured otherwise).
struct MetricsRoutes: Sendable {
    let telemetry: SyncTelemetry
    let storage: any SyncStorage
    let database: (@Sendable () -> DatabaseGauges)?

    func add(to router: Router<some RequestContext>, admin: AdminToken?) {
        router.get("metrics") { request, _ -> Response in
            try admin?.authorize(request)
            return await scrape()
        }
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
