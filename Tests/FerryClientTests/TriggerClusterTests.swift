import Crypto
import FerryClient
import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Triggers on two ferry-server processes over one PostgreSQL database (issue 24): one node
/// at a time delivers the trigger; when it is killed (SIGKILL), the other takes it over once
/// its lease expires, and the webhook gets every change, in version order, at least once.
@Suite("Sync: a trigger across a node's death on PostgreSQL")
struct TriggerClusterTests {
    static let secret = "a-trigger-signing-secret-of-32-bytes-or-more"
    static let adminToken = "an-admin-token-for-tests-of-32-bytes-or-more"

    static func http(_ method: String, _ url: String, headers: [(String, String)], body: String = "") async throws -> (status: Int, json: Any?) {
        let loop = try EventLoop.acquireShared()
        defer { EventLoop.releaseShared() }
        let done = Arrival<Result<HTTPResponse, FerryError>>()
        let request = HTTPRequest(method: method, url: url, headers: headers + [("Content-Type", "application/json")], body: Array(body.utf8))
        loop.post { HTTPClient.send(request, on: loop, tls: TLSOptions(), timeoutMs: 45_000) { done.deliver($0) } }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "\(url) did not answer") }
        let response = try r.get()
        return (response.status, try? JSONSerialization.jsonObject(with: Data(response.body)))
    }

    static func trigger(_ node: String) async throws -> [String: Any] {
        let list = try await http("GET", node + "/api/admin/v1/triggers", headers: [("Authorization", "Bearer \(adminToken)")]).json as? [String: Any]
        return ((list?["triggers"] as? [[String: Any]]) ?? []).first ?? [:]
    }

    static func id(_ r: WebhookReceiver.Request) -> String { ((r.json["documentKey"] as? [String: Any])?["_id"] as? [String: Any])?["$oid"] as? String ?? "" }

    @Test(.enabled(if: SyncTestCluster.isAvailable)) func theOtherNodeTakesOverAndNothingIsMissed() async throws {
        guard let base = SyncTestCluster.postgresURL else { return }
        let receiver = WebhookReceiver()
        let hookPort = try await receiver.start()
        let app = try DataAPIClusterTests.appDirectory()
        try FileManager.default.createDirectory(atPath: app + "/triggers", withIntermediateDirectories: true)
        try Data("""
            {"name": "items", "config": {"collection": "Item", "operation_types": ["INSERT", "UPDATE", "DELETE"]},
             "webhook": {"url": "http://127.0.0.1:\(hookPort)/hook", "secret_name": "FERRY_TRIGGER_SECRET_ITEMS"}}
            """.utf8).write(to: URL(fileURLWithPath: app + "/triggers/items.json"))
        let secrets = ["jwtSigningKey": "a-host-signing-key-of-at-least-32-bytes!", "FERRY_ADMIN_TOKEN": Self.adminToken,
                       "FERRY_DATA_API_KEY_BACKEND": DataAPIClusterTests.key, "FERRY_TRIGGER_SECRET_ITEMS": Self.secret]
        try await SyncTestCluster.withDatabase(base) { database in
            let nodes = try ["node-a", "node-b"].map {
                try ServerProcess(appDirectory: app, database: database, environment: secrets, arguments: ["--trigger-lease-seconds", "2", "--node-id", $0])
            }
            defer { for n in nodes { n.kill() } }
            // The trigger delivers what changes after a node first took it.
            let deadline = Date().addingTimeInterval(60)
            var holder = ""
            while holder.isEmpty, Date() < deadline { holder = try await Self.trigger(nodes[0].url)["node"] as? String ?? "" }
            try #require(!holder.isEmpty, "no node took the trigger")
            let (dying, surviving) = holder == "node-a" ? (nodes[0], nodes[1]) : (nodes[1], nodes[0])

            /// Batch n: three objects in one version, written through `node`.
            var expected: [String] = []
            func write(_ n: Int, through node: ServerProcess) async throws {
                let ids = (0..<3).map { String(format: "68%07d%015d", n, $0) }
                let docs = ids.map { #"{"_id":{"$oid":"\#($0)"},"ownerId":"o","itemName":"n\#(n)","complexity":\#(n)}"# }.joined(separator: ",")
                _ = try await DataAPIClusterTests.call(node.url, "insertMany", #"{"class":"Item","documents":[\#(docs)]}"#)
                expected += ids
            }
            for n in 0..<5 { try await write(n, through: nodes[n % 2]) }
            #expect(await receiver.waitFor(15))
            dying.kill()
            // Written while no node delivers (the dead one's lease runs out first).
            for n in 5..<10 { try await write(n, through: surviving) }
            var distinct: [String] = []
            while distinct.count < expected.count {
                guard await receiver.waitFor(receiver.requests.count + 1) else { break }
                distinct = []
                for r in receiver.delivered where !distinct.contains(Self.id(r)) { distinct.append(Self.id(r)) }
            }
            // Every change at least once; first deliveries in version order (batch order, then key order).
            #expect(distinct == expected)
            let versions = receiver.delivered.map { $0.json["version"] as? Int ?? 0 }
            var firstVersions: [Int] = []
            var seen = Set<String>()
            for (r, v) in zip(receiver.delivered, versions) where seen.insert(Self.id(r)).inserted { firstVersions.append(v) }
            #expect(firstVersions == firstVersions.sorted())
            #expect(receiver.delivered.allSatisfy { r in
                guard let header = r.signature, let comma = header.firstIndex(of: ",") else { return false }
                let t = header.dropFirst(2).prefix(while: { $0 != "," })
                let mac = HMAC<SHA256>.authenticationCode(for: Array("\(t).".utf8) + r.body, using: SymmetricKey(data: Array(Self.secret.utf8)))
                return header[header.index(after: comma)...] == "v1=" + mac.map { String(format: "%02x", $0) }.joined()
            })
            #expect(try await Self.trigger(surviving.url)["node"] as? String == (holder == "node-a" ? "node-b" : "node-a"))
        }
        await receiver.stop()
    }
}
