import FerryCore
import FerryServer
import FerrySQLiteStorage
import FerrySyncStorage
import Foundation
import Testing

/// The admin API's operations endpoints (issue 14): stats, devices, user deletion and session
/// revocation, settings, and the refusal of a bad token with no data.
@Suite("Server: operations admin API")
struct OperationsAPITests {
    @Test func devicesListAConnectedDeviceWithItsSDK() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: "ferry/0.1.0 linux-x86_64 (test host)")
            try await device.subscribe()
            let old = try await OperationsDevice.connect(port: port, sdk: nil)
            let json = try await AdminCall.get(port: port, "/api/admin/v1/devices").json as? [String: Any]
            let devices = try #require(json?["devices"] as? [[String: Any]])
            #expect(devices.count == 2)
            let d = try #require(devices.first { $0["user_id"] as? String == device.userId })
            #expect(d["sdk"] as? String == "ferry/0.1.0 linux-x86_64 (test host)")
            #expect(d["client_file"] as? Int ?? 0 > 0)
            #expect(d["sessions"] as? Int == 1)
            #expect((d["bytes_up"] as? Int ?? 0) > 0 && (d["bytes_down"] as? Int ?? 0) > 0)
            #expect((d["connected_since"] as? String)?.hasSuffix("Z") == true)
            #expect((d["node"] as? String)?.isEmpty == false && d["connection_id"] is Int)
            // A client that names no SDK (an older one) and has not bound yet.
            let o = try #require(devices.first { $0["user_id"] as? String == old.userId })
            #expect(o["sdk"] is NSNull && o["client_file"] is NSNull && o["sessions"] as? Int == 0)
        }
    }

    @Test func theDeviceListHasTheConnectionsOtherNodesPublished() async throws {
        // Another node's publication, written into this node's store as that node would (on
        // PostgreSQL every node shares it): listed while fresh, not once that node went quiet.
        let data = NSTemporaryDirectory() + "ferry-nodes-\(UInt64.random(in: 0...UInt64.max))"
        try await LiveServer.withServer(configure: {
            $0.dataDirectory = data
            $0.nodeId = "node-a"
        }) { port in
            let device = try await OperationsDevice.connect(port: port, sdk: "ferry/a")
            try await device.subscribe()
            let store = try SQLiteOperationsStorage(path: data + "/operations.sqlite")
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            try await store.publishConnections(node: "node-b", [LiveConnectionRecord(node: "node-b", connectionId: 3, userId: "bob", clientFile: 9,
                                                                                      sdk: "ferry/b", connectedSinceMilliseconds: now - 1000)],
                                               nowMilliseconds: now)
            try await store.publishConnections(node: "node-gone", [LiveConnectionRecord(node: "node-gone", connectionId: 1, userId: "carl",
                                                                                         connectedSinceMilliseconds: now - 100_000)],
                                               nowMilliseconds: now - 60_000)
            await store.closeOperations()
            let json = try await AdminCall.get(port: port, "/api/admin/v1/devices").json as? [String: Any]
            let devices = try #require(json?["devices"] as? [[String: Any]])
            #expect(devices.map { $0["node"] as? String } == ["node-a", "node-b"])
            #expect(devices[0]["user_id"] as? String == device.userId && devices[0]["sdk"] as? String == "ferry/a")
            #expect(devices[1]["user_id"] as? String == "bob" && devices[1]["sdk"] as? String == "ferry/b" && devices[1]["client_file"] as? Int == 9)
        }
    }

    @Test func statsCountThisNodesTraffic() async throws {
        try await LiveServer.withServer { port in
            let before = try #require(try await AdminCall.get(port: port, "/api/admin/v1/stats").json as? [String: Any])
            #expect(before["uploads_total"] as? Int == 0 && before["connections"] as? Int == 0 && before["sync_enabled"] as? Bool == true)
            #expect((before["node"] as? String)?.isEmpty == false)
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            try await device.uploadWithRejections()
            var after: [String: Any] = [:]
            try await AdminCall.eventually("the upload in the stats") {
                after = try await AdminCall.get(port: port, "/api/admin/v1/stats").json as? [String: Any] ?? [:]
                return after["compensating_writes_total"] as? Int == 2
            }
            #expect(after["connections"] as? Int == 1 && after["sessions"] as? Int == 1)
            #expect(after["uploads_total"] as? Int == 1 && after["bootstraps_total"] as? Int == 1)
            #expect((after["downloads_total"] as? Int ?? 0) >= 2)
            #expect((after["upload_bytes_total"] as? Int ?? 0) > 100 && (after["download_bytes_total"] as? Int ?? 0) > 0)
            #expect(after["client_resets_total"] as? Int == 0)
        }
    }

    @Test func aClientResetIsCountedWithItsTrigger() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            // A client file the server never made: the device must reset.
            try await device.client.send(WireFormat.message(.bind(session: 1, database: "items", clientFileIdent: 999, clientFileSalt: 5, lastServerVersion: 0)))
            try await device.waitFor("the client-reset error") { if case .error(let e) = $0 { return e.action == .clientReset } else { return false } }
            try await AdminCall.eventually("the reset in the sync log") {
                let log = try await AdminCall.get(port: port, "/api/admin/v1/users/\(device.userId)/sync-log?kind=client_reset").json
                let details = (SyncLogAPITests.entries(log).first?["details"] as? [String: Any])
                return details?["trigger"] as? String == "unknown_client_file"
            }
            let stats = try await AdminCall.get(port: port, "/api/admin/v1/stats").json as? [String: Any]
            #expect(stats?["client_resets_total"] as? Int == 1)
            let metrics = try await MetricsTests.scrape(port: port)
            #expect(metrics.contains("ferry_client_resets_total{trigger=\"unknown_client_file\"} 1"))
        }
    }

    @Test func deletingAUserClosesItsConnectionsAndForgetsIt() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            #expect(try await AdminCall.call(port: port, "DELETE", "/api/admin/v1/users/\(device.userId)").status == 204)
            try await device.waitFor("the logout error") { if case .error(let e) = $0 { return e.action == .logOutUser } else { return false } }
            #expect(await device.client.waitClosed(seconds: 60))
            let users = try await AdminCall.get(port: port, "/api/admin/v1/users").json as? [[String: Any]]
            #expect(users?.contains { $0["id"] as? String == device.userId } == false)
            #expect(try await AdminCall.call(port: port, "DELETE", "/api/admin/v1/users/\(device.userId)").status == 404)
            try await AdminCall.eventually("the closed connection in the log") {
                let log = try await AdminCall.get(port: port, "/api/admin/v1/users/\(device.userId)/sync-log?kind=connection_closed").json
                return (SyncLogAPITests.entries(log).first?["message"] as? String)?.contains("closed") == true
            }
        }
    }

    @Test func revokingSessionsEndsRefreshTokensAndConnections() async throws {
        try await LiveServer.withServer { port in
            let login = try await LiveServer.request(port: port, "POST", "/api/client/v2.0/app/item-app-seeds/auth/providers/anon-user/login")
            let body = try #require(WireFormat.body(login))
            let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            let user = (id: try #require(json["user_id"] as? String), token: try #require(json["access_token"] as? String))
            let refresh = try #require(json["refresh_token"] as? String)
            let device = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            try await device.subscribe()
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/users/\(user.id)/revoke-sessions").status == 204)
            try await device.waitFor("the logout error") { if case .error(let e) = $0 { return e.action == .logOutUser } else { return false } }
            let again = try await LiveServer.request(port: port, "POST", "/api/client/v2.0/auth/session", headers: ["Authorization": "Bearer \(refresh)"])
            #expect(WireFormat.response(again)?.status == 401)
            let metrics = try await MetricsTests.scrape(port: port)
            #expect(MetricsTests.value(metrics, "ferry_auth_total{provider=\"refresh-token\",result=\"failure\"}") == 1)
            // The access token issued before is refused too, for HTTP and for sync.
            let profile = try await LiveServer.request(port: port, "GET", "/api/client/v2.0/auth/profile", headers: ["Authorization": "Bearer \(user.token)"])
            #expect(WireFormat.response(profile)?.status == 401)
            let socket = try await RawClient.connect(port: port)
            try await socket.send(WireFormat.upgradeRequest(token: user.token))
            _ = await socket.wait(seconds: 60) { received, _ in WireFormat.response(received) != nil }
            #expect(WireFormat.response(socket.received)?.status == 401)
            await socket.close()
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/users/nobody/revoke-sessions").status == 404)
        }
    }

    @Test func settingsShowTheAppWithoutSecrets() async throws {
        try await LiveServer.withServer { port in
            let json = try #require(try await AdminCall.get(port: port, "/api/admin/v1/settings").json as? [String: Any])
            #expect((json["app_name"] as? String)?.isEmpty == false)
            #expect(json["queryable_fields"] is [String])
            #expect(json["max_offline_days"] is Int)
            #expect(json["recovery_mode"] as? String == "recover_unsynced_changes")
            let roles = try #require(json["roles"] as? [[String: Any]])
            #expect(roles.contains { $0["name"] as? String == "owner-read-write" && $0["collection"] as? String == "Item" && $0["write"] as? Bool == true })
            let files = try #require(json["files"] as? [[String: Any]])
            #expect(files.contains { $0["path"] as? String == "sync/config.json" })
            #expect(files.allSatisfy { ($0["content"] as? String)?.contains(AuthAPITests.jwtKey) == false })
            #expect(!(String(data: try JSONSerialization.data(withJSONObject: json), encoding: .utf8) ?? "").contains(LiveServer.adminToken))
        }
    }

    @Test(arguments: [("GET", "stats"), ("GET", "devices"), ("GET", "users/u/sync-log"), ("GET", "rejected-writes"), ("GET", "settings"),
                      ("DELETE", "users/u"), ("POST", "users/u/revoke-sessions")])
    func aBadAdminTokenIsRefusedWithNoData(_ call: (String, String)) async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: "ferry/secret-sdk")
            try await device.subscribe()
            for token in ["wrong", nil] as [String?] {
                let response = try await LiveServer.request(port: port, call.0, "/api/admin/v1/\(call.1)",
                                                            headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
                #expect(WireFormat.response(response)?.status == 401)
                let text = String(decoding: response, as: UTF8.self)
                #expect(!text.contains(device.userId) && !text.contains("ferry/secret-sdk") && !text.contains("owner-read-write"))
            }
            // Nothing was deleted or revoked.
            let users = try await AdminCall.get(port: port, "/api/admin/v1/users").json as? [[String: Any]]
            #expect(users?.contains { $0["id"] as? String == device.userId } == true)
        }
    }
}
