import FerryClient
import FerryCore
import Foundation
import Testing

/// The Data API on PostgreSQL with two nodes (issue 24): a backend writes through one node and
/// a real device on the other receives it; the device writes and the backend reads it through
/// either node; a backend delete erases the object on the device.
@Suite("Sync: the Data API on two nodes over PostgreSQL")
struct DataAPIClusterTests {
    static let key = "a-data-api-server-key-of-32-bytes-or-more"

    /// The Item app with the Data API on (one server key).
    static func appDirectory() throws -> String {
        let dir = SyncTestServer.temporaryDirectory("data-api-app")
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.copyItem(atPath: SyncTestServer.appDirectory, toPath: dir)
        try FileManager.default.createDirectory(atPath: dir + "/http_endpoints", withIntermediateDirectories: true)
        try Data(#"{"disabled": false, "server_keys": [{"name": "backend", "secret_name": "FERRY_DATA_API_KEY_BACKEND"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: dir + "/http_endpoints/data_api_config.json"))
        return dir
    }

    /// One Data API call; the answer's JSON object.
    static func call(_ node: String, _ action: String, _ body: String) async throws -> [String: Any] {
        let loop = try EventLoop.acquireShared()
        defer { EventLoop.releaseShared() }
        let done = Arrival<Result<HTTPResponse, FerryError>>()
        let request = HTTPRequest(method: "POST", url: node + "/api/data/v1/app/item-app-seeds/action/" + action,
                                  headers: [("apiKey", key), ("Content-Type", "application/json")], body: Array(body.utf8))
        loop.post { HTTPClient.send(request, on: loop, tls: TLSOptions(), timeoutMs: 45_000) { done.deliver($0) } }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "the Data API did not answer") }
        let response = try r.get()
        guard response.status == 200, let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] else {
            throw FerryError(.sync, "\(action): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
        }
        return json
    }

    @Test(.enabled(if: SyncTestCluster.isAvailable)) func aBackendAndADeviceOnTwoNodesSeeEachOthersWrites() async throws {
        try await SyncTestCluster.withNodes(2, appDirectory: try Self.appDirectory(), secrets: ["FERRY_DATA_API_KEY_BACKEND": Self.key]) { nodes in
            let device = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: "data-api-\(UInt64.random(in: 0...UInt64.max))")))
            defer { device.close() }
            try await device.subscribe("ownerId == \"\(device.user.id)\"")
            try await device.waitDownload()

            // The backend writes through node 1; the device on node 2 gets it.
            let fromBackend = ObjectId.generate()
            _ = try await Self.call(nodes[0], "insertOne", #"{"class":"Item","document":{"_id":{"$oid":"\#(fromBackend.hexString)"},"ownerId":"\#(device.user.id)","itemName":"from the office","complexity":2}}"#)
            try await device.waitDownload()
            #expect(try device.item(fromBackend)?[2] == .string("from the office"))

            // The device writes; the backend reads it through either node.
            let fromDevice = ObjectId.generate()
            try device.createItem(fromDevice, owner: device.user.id, name: "from the field", complexity: 3)
            try await device.waitUpload()
            for node in nodes {
                let page = try await Self.call(node, "find", #"{"class":"Item","filter":"ownerId == $0","arguments":["\#(device.user.id)"]}"#)
                let names = (page["documents"] as? [[String: Any]])?.compactMap { $0["itemName"] as? String }
                #expect(Set(names ?? []) == ["from the office", "from the field"])
            }

            // A backend delete through node 2 erases the object on the device.
            _ = try await Self.call(nodes[1], "deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(fromBackend.hexString)"}}"#)
            try await device.waitDownload()
            #expect(try device.item(fromBackend) == nil)
            #expect(try device.item(fromDevice) != nil)
        }
    }
}
