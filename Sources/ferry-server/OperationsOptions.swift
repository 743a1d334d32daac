import ArgumentParser
import FerryServer
import FerrySyncStorage

/// Metrics, the admin listener, the sync log's retention and this node's name (docs/operations.md).
struct OperationsOptions: ParsableArguments {
    @Option(name: .customLong("metrics-port"), help: "Serve GET /metrics without the admin token on this port (bound to --metrics-host). Without it, /metrics is on the main port behind the admin token.")
    var metricsPort: Int?

    @Option(name: .customLong("metrics-host"), help: "The address of the --metrics-port listener.")
    var metricsHost: String = "127.0.0.1"

    @Option(name: .customLong("admin-port"), help: "Serve the admin API, the console and /metrics (behind the admin token) on this port (bound to --admin-host) and not on the main port. The production setup.")
    var adminPort: Int?

    @Option(name: .customLong("admin-host"), help: "The address of the --admin-port listener.")
    var adminHost: String = "127.0.0.1"

    @Option(name: .customLong("sync-log-max-per-user"), help: "The sync log entries kept per user (the newest).")
    var syncLogMaxPerUser: Int = 1000

    @Option(name: .customLong("sync-log-max-age-days"), help: "Sync log entries older than this many days are dropped.")
    var syncLogMaxAgeDays: Int = 30

    @Option(name: .customLong("sql-tables-schema"), help: "On PostgreSQL: the schema holding the app's classes as plain SQL tables (default ferry_data).")
    var sqlTablesSchema: String = "ferry_data"

    @Flag(name: .customLong("no-sql-tables"), help: "On PostgreSQL: keep no SQL tables of the app's classes.")
    var noSQLTables = false

    @Flag(name: .customLong("rebuild-sql-tables"), help: "On PostgreSQL: drop the SQL tables and make them again from the synced objects at start (after a failed migration, or rows changed by hand).")
    var rebuildSQLTables = false

    @Option(name: .customLong("trigger-lease-seconds"), help: "How long a node holds a trigger without renewing it: after a node dies, another takes its triggers over within this (default 30, at least 2; renewed every third of it).")
    var triggerLeaseSeconds: Int = 30

    @Option(name: .customLong("node-id"), help: "This node's name in the sync log, the device list and the stats (default: the host name and a random suffix).")
    var nodeId: String?

    func apply(to config: inout ServerConfiguration) throws {
        guard syncLogMaxPerUser >= 1 else { throw ValidationError("--sync-log-max-per-user must be at least 1") }
        guard syncLogMaxAgeDays >= 1 else { throw ValidationError("--sync-log-max-age-days must be at least 1") }
        if let metricsPort {
            guard (0...65535).contains(metricsPort) else { throw ValidationError("--metrics-port must be a port number") }
            config.metricsPort = metricsPort
        }
        config.metricsHost = metricsHost
        if let adminPort {
            guard (0...65535).contains(adminPort) else { throw ValidationError("--admin-port must be a port number") }
            config.adminPort = adminPort
        }
        config.adminHost = adminHost
        config.syncLogRetention = SyncLogRetention(maxEntriesPerUser: syncLogMaxPerUser, maxAgeDays: syncLogMaxAgeDays)
        if let nodeId, !nodeId.isEmpty { config.nodeId = nodeId }
        guard !(noSQLTables && rebuildSQLTables) else { throw ValidationError("--rebuild-sql-tables and --no-sql-tables contradict each other") }
        config.sqlTablesSchema = noSQLTables ? nil : sqlTablesSchema
        config.rebuildSQLTables = rebuildSQLTables
        guard (2...3600).contains(triggerLeaseSeconds) else { throw ValidationError("--trigger-lease-seconds must be between 2 and 3600") }
        config.triggerTiming.lease = .seconds(triggerLeaseSeconds)
        config.triggerTiming.renew = .milliseconds(triggerLeaseSeconds * 1000 / 3)
    }
}
