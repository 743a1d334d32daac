@testable import FerryClient
import FerryCore
@testable import FerryStore
import Foundation
import Testing

/// An admin pauses sync and resumes it (issue 14) against a real in-process ferry-server: the
/// devices are told (ERROR 245, transient), keep their data and their local writes, and carry
/// on after the resume with the same client file: no client reset. One node even in cluster
/// mode (the API's answers are checked right after each action; MultiNodeSyncTests has a
/// pause through one node acting on another).
@Suite("Sync: pause and resume through the admin API")
struct PauseSyncTests {
    /// The JSON of an admin call and its status.
    static func admin(_ url: String, _ method: String, _ path: String) async throws -> (status: Int, json: [String: Any]) {
        let response = try await AdminAPI.call(url, method, path)
        let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] ?? [:]
        return (response.status, json)
    }

    @Test func aPausedDeviceKeepsItsWritesAndResumesWithoutAReset() async throws {
        try await SyncTestServer.withSingleServer(secrets: AdminAPI.secrets) { url in
            let p = try await ClientResetSyncTests.Pair(url: url, subject: "pause-resume")
            defer { p.close() }
            try p.sa.createItem(owner: p.owner, name: "before the pause")
            try await p.sa.waitUpload()
            try await p.sb.waitDownload()
            #expect(try p.sb.itemNames() == ["before the pause"])
            let ident = try p.sa.database.syncMetadata().clientFileIdent
            #expect(ident != 0)

            let paused = try await Self.admin(url, "POST", "sync/pause")
            #expect(paused.status == 200)
            #expect(paused.json["state"] as? String == "paused")
            #expect(paused.json["sync_enabled"] as? Bool == false)
            // The device is told: a transient error it retries after, never fatal.
            let told = await p.errorsA.wait(count: 1, seconds: 30)
            #expect(told.first?.code == 245)
            #expect(told.first?.isFatal == false)
            #expect(told.first?.action == .transient)
            #expect(try await Self.admin(url, "GET", "sync").json["state"] as? String == "paused")

            // It keeps its data and writes on while paused (committed locally).
            #expect(try p.sa.itemNames() == ["before the pause"])
            try p.sa.createItem(owner: p.owner, name: "written while paused")
            #expect(try p.sa.itemNames() == ["before the pause", "written while paused"])

            // A device that connects while paused is refused the same way.
            let c = try await SessionTestApp(url: url, subject: "pause-resume-late") {
                $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200
            }
            let errorsC = ErrorLog()
            c.app.errorHandler = { _, e in errorsC.add(e) }
            let sc = try c.open("c.ferry")
            defer { sc.close(); c.app.close() }
            let refused = await errorsC.wait(count: 1, seconds: 30)
            #expect(refused.first?.code == 245)
            #expect(refused.first?.isFatal == false)

            let resumed = try await Self.admin(url, "POST", "sync/resume")
            #expect(resumed.status == 200)
            #expect(resumed.json["state"] as? String == "enabled")
            #expect(resumed.json["sync_enabled"] as? Bool == true)

            // The device reconnects on its own; its write reaches the server and the other device.
            try await p.sa.waitUpload()
            try await p.sb.waitDownload()
            #expect(try p.sb.itemNames() == ["before the pause", "written while paused"])
            // The late device syncs too, once it subscribes.
            try await sc.subscribe("ownerId == '\(c.user.id)'")
            try await sc.waitDownload()
            // Same client file, no reset: no error 208, no reset report, the session active.
            #expect(try p.sa.database.syncMetadata().clientFileIdent == ident)
            #expect(p.errorsA.all.allSatisfy { $0.code != 208 && $0.clientResetReport == nil && !$0.isFatal })
            #expect(p.sa.state == .active)
            try p.sa.createItem(owner: p.owner, name: "after the resume")
            try await p.sa.waitUpload()
            try await p.sb.waitDownload()
            #expect(try p.sb.itemNames().contains("after the resume"))
        }
    }

    @Test func aPauseSurvivesARestartAndTheResumeKeepsTheClientFile() async throws {
        let data = SyncTestServer.temporaryDirectory("pause-server")
        let device = SyncTestServer.temporaryDirectory("pause-device")
        let fast: (inout App.Configuration) -> Void = { $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200 }
        var ident: UInt64 = 0
        try await SyncTestServer.withSingleServer(dataDirectory: data, secrets: AdminAPI.secrets) { url in
            let a = try await SessionTestApp(url: url, subject: "pause-restart", directory: device, configure: fast)
            defer { a.app.close() }
            let s = try a.open("a.ferry")
            defer { s.close() }
            try await s.subscribe("ownerId == '\(a.user.id)'")
            try s.createItem(owner: a.user.id, name: "before the pause")
            try await s.waitUpload()
            ident = try s.database.syncMetadata().clientFileIdent
            #expect(try await Self.admin(url, "POST", "sync/pause").json["state"] as? String == "paused")
        }
        // The next start of the server on the same store is paused: the device is refused.
        try await SyncTestServer.withSingleServer(dataDirectory: data, secrets: AdminAPI.secrets) { url in
            #expect(try await Self.admin(url, "GET", "sync").json["state"] as? String == "paused")
            let a = try SessionTestApp(cachedIn: device, url: url, configure: fast)
            let errors = ErrorLog()
            a.app.errorHandler = { _, e in errors.add(e) }
            defer { a.app.close() }
            let s = try a.open("a.ferry")
            defer { s.close() }
            let refused = await errors.wait(count: 1, seconds: 30)
            #expect(refused.first?.code == 245)
            try s.createItem(owner: a.user.id, name: "while paused")
            #expect(try await Self.admin(url, "POST", "sync/resume").json["state"] as? String == "enabled")
            try await s.waitUpload()
            #expect(try s.database.syncMetadata().clientFileIdent == ident)
            #expect(errors.all.allSatisfy { $0.code != 208 && $0.clientResetReport == nil && !$0.isFatal })
        }
    }

    @Test func theAdminAPIAllowsEachActionOnlyWhereItApplies() async throws {
        try await SyncTestServer.withSingleServer(secrets: AdminAPI.secrets) { url in
            func expect(_ path: String, _ status: Int, _ state: String, _ comment: Comment) async throws {
                let r = try await Self.admin(url, "POST", path)
                #expect(r.status == status, comment)
                if status == 200 {
                    #expect(r.json["state"] as? String == state, comment)
                    #expect(r.json["sync_enabled"] as? Bool == (state == "enabled"), comment)
                } else {
                    #expect(r.json["error_code"] as? String == "SyncStateConflict", comment)
                    #expect((r.json["error"] as? String)?.contains("(sync is \(state))") == true, comment)
                }
                #expect(try await Self.admin(url, "GET", "sync").json["state"] as? String == state, comment)
                #expect(try await Self.admin(url, "GET", "stats").json["state"] as? String == state, comment)
            }
            #expect(try await Self.admin(url, "GET", "sync").json["state"] as? String == "enabled")
            try await expect("sync/resume", 409, "enabled", "resume while enabled")
            try await expect("sync/pause", 200, "paused", "pause")
            try await expect("sync/pause", 200, "paused", "pause again changes nothing")
            try await expect("sync/enable", 409, "paused", "enable while paused: resume or terminate first")
            try await expect("sync/resume", 200, "enabled", "resume")
            try await expect("sync/enable", 200, "enabled", "enable while enabled changes nothing")
            try await expect("sync/pause", 200, "paused", "pause")
            try await expect("sync/terminate", 200, "terminated", "terminate while paused")
            try await expect("sync/resume", 409, "terminated", "a terminate is not resumed")
            try await expect("sync/pause", 409, "terminated", "a terminate is not paused")
            try await expect("sync/enable", 200, "enabled", "enable after a terminate")
            // Each change is in the admin event log.
            let logs = try await Self.admin(url, "GET", "logs").json["entries"] as? [[String: Any]] ?? []
            let kinds = logs.compactMap { $0["kind"] as? String }.filter { $0.hasPrefix("sync_") }
            #expect(kinds == ["sync_paused", "sync_resumed", "sync_paused", "sync_terminated", "sync_enabled"])
        }
    }
}
