import ServiceLifecycle

/// Runs beside the HTTP server for the application's lifetime: starts the hub's change feed,
/// the sync log's writer and the publication of this node's connections; on shutdown stops
/// them (the log writes what it still holds) and closes the store (PostgreSQL's pool and
/// listener).
struct StoreService: Service {
    let hub: SyncHub
    let store: ServerStore
    var syncLog: SyncLogRecorder? = nil
    var publisher: LiveConnectionPublisher? = nil
    var triggers: TriggerRunner? = nil
    var sqlWrites: SQLWriteIntegrator? = nil

    func run() async throws {
        await hub.start()
        let log = Task { await syncLog?.run() }
        let publishing = Task { await publisher?.run() }
        let delivering = Task { await triggers?.run() }
        let integrating = Task { await sqlWrites?.run() }
        // Throws only when the task is cancelled, which is a shutdown as well.
        try? await gracefulShutdown()
        // A SQL transaction cut short stays in the inbox (taken out only by its commit).
        integrating.cancel()
        await integrating.value
        // Triggers stop first: a delivery cut short is delivered again (the cursor was not moved).
        delivering.cancel()
        await delivering.value
        await hub.stop()
        publishing.cancel()
        await publishing.value
        syncLog?.stop()
        await log.value
        await store.close()
    }
}
