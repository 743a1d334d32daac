import ServiceLifecycle

/// Runs beside the HTTP server for the application's lifetime: starts the hub's change feed,
/// and on shutdown stops it and closes the store (PostgreSQL's pool and listener).
struct StoreService: Service {
    let hub: SyncHub
    let store: ServerStore

    func run() async throws {
        await hub.start()
        try? await gracefulShutdown()
        await hub.stop()
        await store.close()
    }
}
