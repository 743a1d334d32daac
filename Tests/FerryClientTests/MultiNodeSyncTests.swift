import FerryClient
import FerryCore
import FerryServer
import FerryStore
import Foundation
import Testing

/// Two ferry-server nodes on one PostgreSQL database serve one app at once: devices on either
/// node see each other's writes, users and tokens work on both, and an admin action taken on
/// one node acts on the other's connections. Needs `FERRY_TEST_POSTGRES_URL` (CI sets it).
@Suite("Sync: two nodes on one PostgreSQL database", .enabled(if: SyncTestCluster.isAvailable, "FERRY_TEST_POSTGRES_URL is not set"))
struct MultiNodeSyncTests {
    /// Items by id as a host intended them: the oracle the devices are compared with.
    static func names(_ d: TestDevice) throws -> [String: String] {
        var out: [String: String] = [:]
        for row in try d.allItems() { if case .objectId(let id) = row[0], case .string(let n) = row[2] { out[id.description] = n } }
        return out
    }

    @Test func writesOnEitherNodeReachDevicesOnTheOther() async throws {
        try await SyncTestCluster.withNodes(2) { nodes in
            let owner = "two-nodes-\(UInt64.random(in: 0...UInt64.max))"
            let a = try await TestDevice(baseURL: nodes[0], credentials: .jwt(testJWT(subject: owner)))
            defer { a.close() }
            let b = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: owner)))
            defer { b.close() }
            let query = "ownerId == \"\(a.user.id)\""
            try await a.subscribe(query)
            try await b.subscribe(query)
            var intended: [String: String] = [:]
            for n in 0..<20 {
                let id = ObjectId.generate()
                let device = n % 2 == 0 ? a : b
                try device.createItem(id, owner: a.user.id, name: "item \(n)", complexity: 1)
                intended[id.description] = "item \(n)"
            }
            try await a.sync()
            try await b.sync()
            try await a.sync()
            #expect(try Self.names(a) == intended)
            #expect(try Self.names(b) == intended)
        }
    }

    @Test func aUserRegisteredThroughOneNodeLogsInThroughTheOther() async throws {
        try await SyncTestCluster.withNodes(2) { nodes in
            let email = "n\(UInt64.random(in: 0...UInt64.max))@example.com"
            let a = try await TestDevice(baseURL: nodes[0], credentials: .emailPassword(email: email, password: "password-123"),
                                         register: (email, "password-123"))
            defer { a.close() }
            let b = try await TestDevice(baseURL: nodes[1], credentials: .emailPassword(email: email, password: "password-123"))
            defer { b.close() }
            #expect(a.user.id == b.user.id)
            // Tokens node 1 issued are good on node 2 (the secret kept in the database).
            try await b.subscribe("ownerId == \"\(a.user.id)\"")
            try await a.subscribe("ownerId == \"\(a.user.id)\"")
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "from node 1", complexity: 1)
            try await a.waitUpload()
            try await b.waitDownload()
            #expect(try Self.names(b) == [id.description: "from node 1"])
        }
    }

    @Test func terminateOnOneNodeStopsSyncOnTheOtherAndSurvivesRestarts() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets) { nodes in
            let owner = "terminate-\(UInt64.random(in: 0...UInt64.max))"
            let b = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: owner)))
            defer { b.close() }
            try await b.subscribe("ownerId == \"\(b.user.id)\"")
            try await AdminAPI.post(nodes[0], "sync/terminate")
            // The device on node 2 is told (error 240), whatever node took the action.
            let errors = await b.errors.wait(count: 1, seconds: 30)
            #expect(errors.first?.code == 240)
            let status = try await AdminAPI.call(nodes[1], "GET", "sync")
            let json = try JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any]
            #expect(json?["sync_enabled"] as? Bool == false)
        }
    }

    @Test func aPauseAndResumeThroughOneNodeActOnTheOther() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets) { nodes in
            let owner = "pause-\(UInt64.random(in: 0...UInt64.max))"
            let a = try await TestDevice(baseURL: nodes[0], credentials: .jwt(testJWT(subject: owner)))
            let b = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: owner)))
            defer { a.close(); b.close() }
            try await a.subscribe("ownerId == \"\(a.user.id)\"")
            try await b.subscribe("ownerId == \"\(b.user.id)\"")
            let ident = try b.db.syncMetadata().clientFileIdent
            #expect(ident != 0)

            try await AdminAPI.post(nodes[0], "sync/pause")
            // The device on node 2 is told (error 245, transient), whatever node took the action.
            let errors = await b.errors.wait(count: 1, seconds: 30)
            #expect(errors.first?.code == 245)
            #expect(errors.first?.isFatal == false)
            let status = try await AdminAPI.call(nodes[1], "GET", "sync")
            let json = try JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any]
            #expect(json?["state"] as? String == "paused")

            // Written on node 2's device while paused, it reaches node 1's device after the resume.
            let id = ObjectId.generate()
            try b.db.beginWrite()
            try b.db.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(b.user.id)), (2, .string("while paused")), (3, .int(1))])
            try b.db.commit()
            try await AdminAPI.post(nodes[0], "sync/resume")
            try await b.waitUpload()
            try await a.waitDownload()
            #expect(try Self.names(a) == [id.description: "while paused"])
            #expect(try b.db.syncMetadata().clientFileIdent == ident)
            #expect(b.errors.all.allSatisfy { $0.code != 208 && $0.clientResetReport == nil && !$0.isFatal })
        }
    }

    @Test func aUserDisabledThroughOneNodeIsDisconnectedFromTheOther() async throws {
        try await SyncTestCluster.withNodes(2, secrets: AdminAPI.secrets) { nodes in
            let owner = "disable-\(UInt64.random(in: 0...UInt64.max))"
            let b = try await TestDevice(baseURL: nodes[1], credentials: .jwt(testJWT(subject: owner)))
            defer { b.close() }
            try await b.subscribe("ownerId == \"\(b.user.id)\"")
            try await AdminAPI.post(nodes[0], "users/\(b.user.id)/disable")
            // Node 2 hears the revision move and ends the user's connection (error 401, log out).
            let errors = await b.errors.wait(count: 1, seconds: 30)
            #expect(errors.first?.code == 401)
        }
    }
}
