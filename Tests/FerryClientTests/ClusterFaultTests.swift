import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Two `ferry-server` processes on one PostgreSQL database behind tools/fault-proxy, devices of
/// several users writing through them, while node 1 is killed with SIGKILL and started again
/// and node 2's database connections are cut and restored (a second proxy between node 2 and
/// PostgreSQL). At the end every device holds exactly what the hosts of its user committed:
/// every item, once, and a counter every transaction added 1 to (an upload applied twice or
/// lost would show there). Needs `FERRY_TEST_POSTGRES_URL` (CI sets it).
@Suite("Cluster: a node killed, a database connection cut", .enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
struct ClusterFaultTests {
    static let users = 3
    static let devicesPerUser = 2
    static let rounds = 24

    @Test func acknowledgedWritesSurviveANodeKillAndADatabaseCut() async throws {
        guard let base = SyncTestCluster.postgresURL else { return }
        try await SyncTestCluster.withDatabase(base) { database in
            // Node 2 reaches PostgreSQL through a proxy the test can cut.
            let (proxiedDatabase, databaseProxy) = try SyncTestCluster.proxied(database)
            defer { databaseProxy.stop() }
            let secrets = ["jwtSigningKey": "a-host-signing-key-of-at-least-32-bytes!"]
            let node1 = try ServerProcess(appDirectory: SyncTestServer.appDirectory, database: database, environment: secrets)
            defer { node1.kill() }
            let node2 = try ServerProcess(appDirectory: SyncTestServer.appDirectory, database: proxiedDatabase, environment: secrets)
            defer { node2.kill() }
            let front = try FaultProxy(serverURLs: [node1.url, node2.url])
            defer { front.stop() }

            // Devices of each user, spread over both nodes by the front proxy; each user has a
            // counter object every transaction adds 1 to.
            var devices: [[TestDevice]] = []
            var counters: [ObjectId] = []
            defer { for d in devices.joined() { d.close() } }
            // Every device starts on node 1 (node 2 held out of the proxy's rotation meanwhile;
            // a device's login and its sync connection are two connections in a row, so plain
            // round robin would have put every sync connection on one node, by parity). Killing
            // node 1 moves them all to node 2; cutting node 2's database then sends them
            // through the rotation again, over both nodes.
            try front.command("target-down 1")
            for u in 0..<Self.users {
                let subject = "cluster-fault-\(u)-\(UInt64.random(in: 0...UInt64.max))"
                var mine: [TestDevice] = []
                for _ in 0..<Self.devicesPerUser {
                    mine.append(try await TestDevice(baseURL: front.url, credentials: .jwt(testJWT(subject: subject))))
                }
                for d in mine { try await d.subscribe("ownerId == \"\(mine[0].user.id)\"") }
                let counter = ObjectId.generate()
                try mine[0].createItem(counter, owner: mine[0].user.id, name: "counter", complexity: 0)
                try await mine[0].waitUpload()
                for d in mine.dropFirst() { try await d.waitDownload() }
                devices.append(mine)
                counters.append(counter)
            }
            try front.command("target-up 1")

            var intended: [[String: String]] = Array(repeating: [:], count: Self.users)
            for u in 0..<Self.users { intended[u][counters[u].description] = "counter" }
            for round in 0..<Self.rounds {
                for u in 0..<Self.users {
                    for (n, d) in devices[u].enumerated() {
                        let id = ObjectId.generate()
                        let name = "u\(u) d\(n) r\(round)"
                        try d.write { db in
                            try db.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(d.user.id)), (2, .string(name)), (3, .int(1))])
                            try db.addInteger(classIndex: 0, key: .objectId(counters[u]), property: 3, delta: 1)
                        }
                        intended[u][id.description] = name
                    }
                }
                let only = ProcessInfo.processInfo.environment["FERRY_FAULT_ONLY"]
                switch round {
                case 6 where only != "db":
                    // The node dies with devices on it (the proxy spreads them over both).
                    let targets = try front.command("targets")
                    #expect(!targets.contains("0 \(node1.url.dropFirst("http://".count)) up open=0 "), "no device was on node 1: \(targets)")
                    node1.kill()
                case 10 where only != "db": try node1.start()
                case 14 where only != "kill": try databaseProxy.command("target-down 0")
                case 18 where only != "kill": try databaseProxy.command("target-up 0")
                default: break
                }
                // Pacing, not a wait for an outcome: the devices upload in the background while
                // the faults come and go.
                try await Task.sleep(for: .milliseconds(100))
            }

            // Every device uploads everything, then downloads everything.
            for (n, d) in devices.joined().enumerated() {
                do { try await Self.settle { try await d.waitUpload() } } catch {
                    let targets = (try? front.command("targets")) ?? "?"
                    Issue.record("device \(n) did not finish uploading: \(error); its state \(d.session.state), connection \(d.session.connectionState), errors \(d.errors.all.map { "\($0.code) \($0.message)" }); front proxy: \(targets)")
                    throw error
                }
            }
            for d in devices.joined() { try await Self.settle { try await d.waitDownload() } }
            for u in 0..<Self.users {
                for d in devices[u] {
                    #expect(try MultiNodeSyncTests.names(d) == intended[u])
                    let counter = try #require(try d.item(counters[u]))
                    #expect(counter[3] == .int(Int64(Self.rounds * Self.devicesPerUser)))
                }
            }
        }
    }

    /// Retries a wait that may time out while a device is still in its reconnect backoff.
    static func settle(_ wait: () async throws -> Void) async throws {
        for attempt in 1...6 {
            do { return try await wait() } catch let e as FerryError where e.code == .timeout && attempt < 6 {
                continue
            }
        }
    }
}
