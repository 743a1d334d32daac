import FerryCore
import FerryPostgresStorage
import FerrySyncStorage
import Foundation
import Logging
import Testing

/// A node whose database connections are cut (a proxy between it and PostgreSQL resets them
/// and refuses new ones): its store calls fail promptly with a clear error instead of hanging,
/// and work again by themselves once the database is reachable.
@Suite("PostgreSQL: a cut database connection", .enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
struct PostgresOutageTests {
    @Test func storeCallsFailPromptlyDuringAnOutageAndRecoverAfterIt() async throws {
        try await Self.withProxiedStore { storage, proxy in
            _ = try await storage.newClientFile(userId: "u")

            _ = try proxy.command("target-down 0")
            // Each call fails (not hangs) once no pooled connection comes within the lease
            // deadline (5 s); the hub then answers its device 503 (try again).
            for n in 0..<3 {
                let started = Date()
                if n < 2 {
                    await #expect(throws: (any Error).self) { _ = try await storage.newClientFile(userId: "u") }
                } else {
                    await #expect(throws: (any Error).self) { _ = try await storage.syncState() }
                }
                #expect(Date().timeIntervalSince(started) < 20, "a store call during the outage must fail, not hang")
            }

            _ = try proxy.command("target-up 0")
            // Back by itself: retried here only as a client would, for up to 30 s.
            let deadline = Date().addingTimeInterval(30)
            var recovered = false
            while !recovered && Date() < deadline {
                do {
                    _ = try await storage.newClientFile(userId: "u")
                    recovered = true
                } catch {
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
            #expect(recovered)
            #expect(try await storage.clientFileCount(userId: "u") == 2)
        }
    }

    /// Six tasks using the store the way a node's sessions do (write transactions, catch-up
    /// reads, sync-state reads) while its connections are cut for a moment: every task gets
    /// through, none hangs, and the history has every committed write. A write whose COMMIT
    /// lost its connection may have committed anyway (its reply never came): the history may
    /// hold it, but nothing that was never attempted, and nothing twice.
    @Test func aBriefCutUnderLoadDoesNotWedgeTheStore() async throws {
        try await Self.withProxiedStore { storage, proxy in
            let schema = try Schema([ObjectSchema(name: "Note", properties: [
                Property(name: "_id", type: .string, isPrimaryKey: true), Property(name: "text", type: .string),
            ])])
            let note = try #require(schema.objectSchema(named: "Note"))
            let file = try await storage.newClientFile(userId: "u").ident
            let started = Date()
            // What the writers were told: committed, or failed (outcome unknown).
            let (committed, failed) = try await withThrowingTaskGroup(of: (Set<String>, Set<String>).self) { group in
                for t in 0..<6 {
                    group.addTask {
                        var mine = Set<String>(), lost = Set<String>()
                        for i in 0..<60 {
                            let key = ObjectKey(table: "Note", key: .string("t\(t)-\(i)"))
                            let object = StampedObject(values: [key.key, .string("x")], stamps: [Stamp(timestamp: 1, fileIdent: 1), Stamp(timestamp: 1, fileIdent: 1)], versions: [1, 1])
                            do {
                                _ = try await storage.writeTransaction { tx in
                                    try await tx.write(objects: [key: StoredObject(object: object)], clientFile: file, clientVersion: 0)
                                }
                                mine.insert("t\(t)-\(i)")
                            } catch {
                                lost.insert("t\(t)-\(i)")
                            }
                            _ = try? await storage.syncState()
                            try? await storage.changes(since: 0, schema: note) { _ in }
                            try await Task.sleep(for: .milliseconds(10))
                        }
                        return (mine, lost)
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(400))
                    _ = try proxy.command("target-down 0")
                    try await Task.sleep(for: .milliseconds(500))
                    _ = try proxy.command("target-up 0")
                    return ([], [])
                }
                var all = (Set<String>(), Set<String>())
                for try await (mine, lost) in group { all.0.formUnion(mine); all.1.formUnion(lost) }
                return all
            }
            let elapsed = Date().timeIntervalSince(started)
            #expect(elapsed < 90, "the tasks took \(elapsed) s")
            var stored = [String]()
            try await storage.changes(since: 0, schema: note) { change in
                if case .string(let key) = change.key { stored.append(key) }
            }
            let storedSet = Set(stored)
            #expect(committed.isSubset(of: storedSet), "every write reported committed is stored")
            #expect(storedSet.isSubset(of: committed.union(failed)), "nothing is stored that was not written")
            // One version per stored write: none was applied twice.
            #expect(try await storage.syncState().headVersion == UInt64(storedSet.count))
            print("outage under load: \(committed.count) of 360 writes committed, \(storedSet.count - committed.count) more whose COMMIT lost its reply, in \(elapsed) s")
        }
    }

    /// A PostgreSQL store on a fresh database, reached through a fault proxy the test can cut.
    static func withProxiedStore(_ body: (PostgresSyncStorage, FaultProxy) async throws -> Void) async throws {
        guard let base = SyncTestCluster.postgresURL else { return }
        try await SyncTestCluster.withDatabase(base) { database in
            let (proxied, proxy) = try SyncTestCluster.proxied(database)
            defer { proxy.stop() }
            var logger = Logger(label: "outage-test")
            logger.logLevel = .critical
            let backend = try await PostgresBackend.open(try PostgresLocation(url: proxied), logger: logger, maximumConnections: 4)
            do { try await body(backend.storage, proxy) } catch {
                await backend.close()
                throw error
            }
            await backend.close()
        }
    }
}
