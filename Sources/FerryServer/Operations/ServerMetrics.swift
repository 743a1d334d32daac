import FerryCore
import CoreMetrics
import Metrics
import Prometheus

/// This server's metrics (docs/operations.md lists each), through swift-metrics objects made
/// by a Prometheus factory over a registry of this server's own. Not the global
/// `MetricsSystem`: it can be bootstrapped once per process, and tests run many servers in one.
/// A name is either labelled or not (the registry refuses both): the open sessions are
/// `sum(ferry_sessions)` over their states.
///
/// Counters also keep their totals here (`Totals`), for the admin API's `stats`, which must
/// answer without the hub and cannot read a Prometheus counter back.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory

    /// This node's totals since it started (`GET /api/admin/v1/stats`).
    struct Totals: Sendable {
        var uploads = 0
        var downloads = 0
        var uploadBytes = 0
        var downloadBytes = 0
        var compensatingWrites = 0
        var clientResets = 0
        var bootstraps = 0
    }
    private let totals = LockedValue(Totals())
    var snapshot: Totals { totals.withLock { $0 } }

    private let connections: Meter
    private let sessionsByState: [SessionState: Meter]
    private let uploadBytes: CoreMetrics.Counter
    private let downloadBytes: CoreMetrics.Counter
    private let changesetsUploaded: CoreMetrics.Counter
    private let changesetsDownloaded: CoreMetrics.Counter
    private let uploadsIntegrated: CoreMetrics.Counter
    private let integration: CoreMetrics.Timer
    private let writeAck: CoreMetrics.Timer
    private let bootstraps: CoreMetrics.Counter
    private let bootstrapTime: CoreMetrics.Timer
    private let historyHead: Meter
    private let oldestNeeded: Meter
    private let syncLogDropped: CoreMetrics.Counter
    private let outboxQueuedBytes: Meter
    private let outboxesShed: CoreMetrics.Counter
    private let poolInUse: Meter?
    private let poolIdle: Meter?
    private let poolSize: Meter?
    private let feedLag: Meter?

    /// `postgres`: the store is PostgreSQL, whose pool and change feed have metrics of their own.
    init(postgres: Bool = false) {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Sync latencies run from a millisecond (an ack on an idle server) to many seconds (a
        // bootstrap of a large view, a write under overload).
        factory.defaultDurationHistogramBuckets = [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                                   .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                                                   .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30), .seconds(60)]
        self.factory = factory
        connections = Meter(label: "ferry_connections", factory: factory)
        var byState: [SessionState: Meter] = [:]
        for s in SessionState.allCases { byState[s] = Meter(label: "ferry_sessions", dimensions: [("state", s.rawValue)], factory: factory) }
        sessionsByState = byState
        uploadBytes = CoreMetrics.Counter(label: "ferry_upload_bytes_total", factory: factory)
        downloadBytes = CoreMetrics.Counter(label: "ferry_download_bytes_total", factory: factory)
        changesetsUploaded = CoreMetrics.Counter(label: "ferry_changesets_uploaded_total", factory: factory)
        changesetsDownloaded = CoreMetrics.Counter(label: "ferry_changesets_downloaded_total", factory: factory)
        uploadsIntegrated = CoreMetrics.Counter(label: "ferry_uploads_integrated_total", factory: factory)
        integration = CoreMetrics.Timer(label: "ferry_upload_integration_seconds", factory: factory)
        writeAck = CoreMetrics.Timer(label: "ferry_write_ack_seconds", factory: factory)
        bootstraps = CoreMetrics.Counter(label: "ferry_bootstraps_total", factory: factory)
        bootstrapTime = CoreMetrics.Timer(label: "ferry_bootstrap_seconds", factory: factory)
        historyHead = Meter(label: "ferry_history_head_version", factory: factory)
        oldestNeeded = Meter(label: "ferry_oldest_needed_version", factory: factory)
        syncLogDropped = CoreMetrics.Counter(label: "ferry_sync_log_dropped_total", factory: factory)
        outboxQueuedBytes = Meter(label: "ferry_outbox_queued_bytes", factory: factory)
        outboxesShed = CoreMetrics.Counter(label: "ferry_outbox_shed_total", factory: factory)
        poolInUse = postgres ? Meter(label: "ferry_db_pool_connections", dimensions: [("state", "in_use")], factory: factory) : nil
        poolIdle = postgres ? Meter(label: "ferry_db_pool_connections", dimensions: [("state", "idle")], factory: factory) : nil
        poolSize = postgres ? Meter(label: "ferry_db_pool_max_connections", factory: factory) : nil
        feedLag = postgres ? Meter(label: "ferry_change_feed_lag_seconds", factory: factory) : nil
        // Every labelled series exists from the start (at 0), so a rate() sees its first event.
        for r in CompensatingWriteRule.allCases { _ = CoreMetrics.Counter(label: "ferry_compensating_writes_total", dimensions: [("reason", r.rawValue)], factory: factory) }
        for t in ClientResetTrigger.allCases { _ = CoreMetrics.Counter(label: "ferry_client_resets_total", dimensions: [("trigger", t.rawValue)], factory: factory) }
        for ahead in [true, false] {
            for used in [true, false] { _ = premergeCounter(ahead: ahead, used: used) }
        }
    }

    /// An upload merged outside the write lock (`PremergedUpload`): `ahead` while its
    /// connection's previous upload was being handled, else in its own turn; `used` when the
    /// commit took that merge, false when what it read had moved and it merged again.
    func premerge(ahead: Bool, used: Bool) { premergeCounter(ahead: ahead, used: used).increment() }

    private func premergeCounter(ahead: Bool, used: Bool) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: "ferry_upload_premerges_total", dimensions: [("ahead", ahead ? "true" : "false"), ("outcome", used ? "used" : "merged_again")],
                            factory: factory)
    }

    // MARK: Traffic

    func received(bytes: Int) {
        uploadBytes.increment(by: bytes)
        totals.withLock { $0.uploadBytes += bytes }
    }

    func sent(bytes: Int) {
        downloadBytes.increment(by: bytes)
        totals.withLock { $0.downloadBytes += bytes }
    }

    /// An UPLOAD message with `changesets` changesets arrived.
    func uploadReceived(changesets: Int) {
        changesetsUploaded.increment(by: changesets)
        totals.withLock { $0.uploads += 1 }
    }

    /// A DOWNLOAD message with `changesets` changesets went out.
    func downloadSent(changesets: Int) {
        changesetsDownloaded.increment(by: changesets)
        totals.withLock { $0.downloads += 1 }
    }

    /// An upload's transaction committed, `started` being when it was submitted.
    func uploadIntegrated(since started: ContinuousClock.Instant) {
        uploadsIntegrated.increment()
        integration.record(duration: ContinuousClock.now - started)
    }

    /// An upload was acknowledged (or answered with an error), `started` when it arrived.
    func writeAcknowledged(since started: ContinuousClock.Instant) { writeAck.record(duration: ContinuousClock.now - started) }

    func compensatingWrite(_ rule: CompensatingWriteRule) {
        CoreMetrics.Counter(label: "ferry_compensating_writes_total", dimensions: [("reason", rule.rawValue)], factory: factory).increment()
        totals.withLock { $0.compensatingWrites += 1 }
    }

    func clientReset(_ trigger: ClientResetTrigger) {
        CoreMetrics.Counter(label: "ferry_client_resets_total", dimensions: [("trigger", trigger.rawValue)], factory: factory).increment()
        totals.withLock { $0.clientResets += 1 }
    }

    func bootstrap(since started: ContinuousClock.Instant) {
        bootstraps.increment()
        bootstrapTime.record(duration: ContinuousClock.now - started)
        totals.withLock { $0.bootstraps += 1 }
    }

    /// `provider`: the provider type (`anon-user`, `local-userpass`, …, or `access-token` for
    /// the sync endpoint's token check).
    func authenticated(provider: String, success: Bool) {
        CoreMetrics.Counter(label: "ferry_auth_total", dimensions: [("provider", provider), ("result", success ? "success" : "failure")], factory: factory).increment()
    }

    func syncLogEntryDropped() { syncLogDropped.increment() }

    /// A backend's SQL transaction integrated or refused (`result`).
    func sqlWrites(result: String) {
        CoreMetrics.Counter(label: "ferry_sql_writes_total", dimensions: [("result", result)], factory: factory).increment()
    }

    /// A trigger's change delivered to its webhook (a 2xx answer).
    func triggerDelivered(_ name: String, count: Int = 1) {
        CoreMetrics.Counter(label: "ferry_trigger_deliveries_total", dimensions: [("trigger", name)], factory: factory).increment(by: count)
    }

    /// A trigger's delivery failed (an answer other than 2xx, a timeout, a refused connection).
    func triggerFailed(_ name: String) {
        CoreMetrics.Counter(label: "ferry_trigger_failures_total", dimensions: [("trigger", name)], factory: factory).increment()
    }

    /// 1 while a trigger is paused after too many failures, else 0 (as this node last saw it).
    func triggerPaused(_ name: String, _ paused: Bool) {
        Meter(label: "ferry_trigger_paused", dimensions: [("trigger", name)], factory: factory).set(paused ? 1 : 0)
    }

    /// The bytes queued to be sent on every sync connection together (`OutboxBudget`).
    func outboxQueued(bytes: Int) { outboxQueuedBytes.set(bytes) }

    /// A connection was dropped to keep every connection's queue within the server's bound.
    func outboxShed() { outboxesShed.increment() }

    // MARK: Read at scrape time

    /// Sets the gauges that are read rather than counted, just before a scrape.
    func refresh(live: LiveConnections.Counts, headVersion: UInt64?, oldestNeededVersion: UInt64?, database: DatabaseGauges?) {
        connections.set(live.connections)
        for (state, meter) in sessionsByState { meter.set(live.sessions[state] ?? 0) }
        if let headVersion { historyHead.set(Int64(clamping: headVersion)) }
        if let oldestNeededVersion { oldestNeeded.set(Int64(clamping: oldestNeededVersion)) }
        if let database {
            poolInUse?.set(database.poolInUse)
            poolIdle?.set(max(0, database.poolSize - database.poolInUse))
            poolSize?.set(database.poolSize)
            if let lag = database.changeFeedLagSeconds { feedLag?.set(lag) }
        }
    }

    /// The Prometheus text exposition of every metric.
    func render() -> [UInt8] { registry.emitToBuffer() }
}
