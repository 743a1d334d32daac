import FerryAppConfig
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing
@testable import FerryServer

extension SyncHub {
    /// Occupies the hub actor until `release` is signalled: nothing else runs on it meanwhile,
    /// as under a long queue of work. `entered` is signalled once it holds the actor.
    func holdBusy(entered: DispatchSemaphore, release: DispatchSemaphore) {
        entered.signal()
        release.wait()
    }
}

/// Issue 13: under overload the admin API, which waited on the sync hub, went dark. Its sync
/// status is answered from `SyncStatus`, beside the hub.
@Suite("Server: admin status beside the hub")
struct AdminStatusTests {
    static let adminToken = String(repeating: "t", count: 32)
    @Test func theSyncStatusIsAnsweredWhileTheHubIsBusy() async throws {
        let config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                         dataDirectory: NSTemporaryDirectory() + "ferry-status-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(atPath: config.dataDirectory, withIntermediateDirectories: true)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let store = try await ServerStore.open(config, logger: logger)
        let events = ServerEventLog()
        let hub = try await SyncHub(app: try AppDirectory.load(config.appDirectory), storage: store.sync, directory: store.users,
                                    logger: logger, events: events)
        let users = store.users
        let admin = try AdminToken(token: Self.adminToken)

        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let busy = Task.detached { await hub.holdBusy(entered: entered, release: release) }
        await withCheckedContinuation { c in DispatchQueue.global().async { entered.wait(); c.resume() } }

        // The request, with a deadline: waiting on the hub it would never end.
        let answered = await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                let router = Router(context: ServerRequestContext.self)
                AdminRoutes(admin: admin, directory: users, hub: hub, events: events).add(to: router)
                try? await Application(router: router).test(.router) { client in
                    try await client.execute(uri: "/api/admin/v1/sync", method: .get, headers: [.authorization: "Bearer \(Self.adminToken)"]) { response in
                        #expect(response.status == .ok)
                        let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                        #expect(json?["sync_enabled"] as? Bool == true)
                        #expect(json?["connections"] as? Int == 0)
                    }
                }
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return false
            }
            let first = await group.next() ?? nil
            release.signal()  // whatever happened, the hub goes on (a waiting request then ends)
            group.cancelAll()
            return first
        }
        #expect(answered == true, "the admin API did not answer while the hub was busy")
        await busy.value
        await store.close()
    }
}
