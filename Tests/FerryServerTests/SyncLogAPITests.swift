import FerryCore
import FerryServer
import FerrySyncStorage
import Foundation
import Testing

/// The per-user sync log and the rejected writes through the admin API, from a real device's
/// connect, bind, subscription, upload and compensating writes (issue 14).
@Suite("Server: sync log and rejected writes")
struct SyncLogAPITests {
    typealias Entries = [[String: Any]]

    static func entries(_ json: Any?) -> Entries { (json as? [String: Any])?["entries"] as? Entries ?? [] }

    @Test func aDevicesSyncAppearsInItsUsersLogWithFiltersAndPaging() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: "ferry/9.9.9 test")
            try await device.subscribe()
            let keys = try await device.uploadWithRejections()
            let path = "/api/admin/v1/users/\(device.userId)/sync-log"
            var log: Entries = []
            try await AdminCall.eventually("the upload's compensating writes in the sync log") {
                log = Self.entries(try await AdminCall.get(port: port, path).json)
                return log.filter { $0["kind"] as? String == "compensating_write" }.count == 2
            }
            // Newest first, ids falling, every entry of this user and node.
            let kinds = log.compactMap { $0["kind"] as? String }
            #expect(Array(kinds.reversed().prefix(4)) == ["connection_opened", "session_bound", "subscription_changed", "upload"])
            let ids = log.compactMap { $0["id"] as? Int }
            #expect(ids == ids.sorted(by: >) && ids.count == log.count)
            #expect(log.allSatisfy { $0["user_id"] as? String == device.userId && ($0["node"] as? String)?.isEmpty == false })
            #expect(log.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true && $0["connection_id"] as? Int == log[0]["connection_id"] as? Int })

            let opened = try #require(log.first { $0["kind"] as? String == "connection_opened" })
            #expect((opened["details"] as? [String: Any])?["sdk"] as? String == "ferry/9.9.9 test")
            let subscription = try #require(log.first { $0["kind"] as? String == "subscription_changed" })
            let sd = try #require(subscription["details"] as? [String: Any])
            #expect(sd["state"] as? String == "complete")
            #expect((sd["queries"] as? Entries)?.first?["query"] as? String == "complexity <= 4")
            // The upload, summarised per object: type, operation, key, count.
            let upload = try #require(log.first { $0["kind"] as? String == "upload" })
            let changes = try #require((upload["details"] as? [String: Any])?["changesets"] as? Entries)
            #expect(changes.map { $0["primary_key"] as? String } == keys.map { $0.description })
            #expect(changes.allSatisfy { $0["object_type"] as? String == "Item" && $0["operation"] as? String == "create" && $0["count"] as? Int == 1
                && $0["client_version"] as? Int == 1 })
            // Every reason, each with its rule.
            let rejected = log.filter { $0["kind"] as? String == "compensating_write" }.compactMap { $0["details"] as? [String: Any] }
            #expect(Set(rejected.compactMap { $0["rule"] as? String }) == ["query_view", "write_filter"])
            #expect(rejected.contains { ($0["reason"] as? String)?.contains("outside of the current query view") == true && $0["primary_key"] as? String == keys[1].description })

            // Filters: kinds, and a time window that ends before everything.
            let uploads = Self.entries(try await AdminCall.get(port: port, path + "?kind=upload,session_bound").json)
            #expect(uploads.compactMap { $0["kind"] as? String } == ["upload", "session_bound"])
            let none = Self.entries(try await AdminCall.get(port: port, path + "?until=2001-01-01T00:00:00Z").json)
            #expect(none.isEmpty)
            let uploadTime = try #require(upload["time"] as? String)
            let since = Self.entries(try await AdminCall.get(port: port, path + "?since=\(uploadTime)").json)
            #expect(since.contains { $0["id"] as? Int == upload["id"] as? Int })
            #expect(since.allSatisfy { ($0["time"] as? String ?? "") >= uploadTime } && since.count < log.count + 1)
            #expect(Self.entries(try await AdminCall.get(port: port, path + "?since=2100-01-01T00:00:00.000Z").json).isEmpty)
            #expect(try await AdminCall.get(port: port, path + "?kind=nonsense").status == 400)

            // Paging: two at a time, `next` leading on until the end.
            var paged: [Int] = []
            var before: Int?
            repeat {
                let page = try await AdminCall.get(port: port, path + "?limit=2" + (before.map { "&before=\($0)" } ?? "")).json as? [String: Any]
                paged += Self.entries(page).compactMap { $0["id"] as? Int }
                before = page?["next"] as? Int
                #expect(page?.keys.contains("next") == true)
            } while before != nil
            #expect(paged == ids)

            // Another user's log holds none of it.
            let other = try await LiveServer.anonymousUser(port: port)
            #expect(Self.entries(try await AdminCall.get(port: port, "/api/admin/v1/users/\(other.id)/sync-log").json).isEmpty)
        }
    }

    @Test func aFullLastPageSaysItIsTheLast() async throws {
        try await LiveServer.withServer { port in
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            let path = "/api/admin/v1/users/\(device.userId)/sync-log"
            try await AdminCall.eventually("the subscription in the log") {
                Self.entries(try await AdminCall.get(port: port, path + "?kind=subscription_changed").json).count == 1
            }
            // connection_opened, session_bound, subscription_changed: three entries.
            let full = try await AdminCall.get(port: port, path + "?limit=3").json as? [String: Any]
            #expect(Self.entries(full).count == 3)
            #expect(full?["next"] is NSNull)
            let short = try await AdminCall.get(port: port, path + "?limit=2").json as? [String: Any]
            #expect(short?["next"] as? Int == Self.entries(short).last?["id"] as? Int)
        }
    }

    @Test func rejectedWritesListTheSeedsReasonsAcrossUsers() async throws {
        try await LiveServer.withServer { port in
            let ann = try await OperationsDevice.connect(port: port, sdk: nil)
            try await ann.subscribe()
            let annKeys = try await ann.uploadWithRejections()
            let bob = try await OperationsDevice.connect(port: port, sdk: nil)
            try await bob.subscribe()
            try await bob.uploadWithRejections()
            var all: Entries = []
            try await AdminCall.eventually("four rejected writes") {
                all = Self.entries(try await AdminCall.get(port: port, "/api/admin/v1/rejected-writes").json)
                return all.count == 4
            }
            #expect(all.prefix(2).allSatisfy { $0["user_id"] as? String == bob.userId })
            let filter = try #require(all.first { $0["user_id"] as? String == ann.userId && $0["rule"] as? String == "write_filter" })
            // The seeds' text, exactly.
            #expect(filter["reason"] as? String == "write to \"\(annKeys[2])\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
            #expect(filter["role"] as? String == "owner-read-write")
            #expect(filter["object_type"] as? String == "Item" && filter["primary_key"] as? String == annKeys[2].description)
            let view = try #require(all.first { $0["user_id"] as? String == ann.userId && $0["rule"] as? String == "query_view" })
            #expect(view["reason"] as? String == "write to \"\(annKeys[1])\" in table \"Item\" not allowed; object is outside of the current query view")
            #expect(view["role"] is NSNull)
            // One user's, and pages.
            let annOnly = Self.entries(try await AdminCall.get(port: port, "/api/admin/v1/rejected-writes?user=\(ann.userId)").json)
            #expect(annOnly.count == 2 && annOnly.allSatisfy { $0["user_id"] as? String == ann.userId })
            let first = try await AdminCall.get(port: port, "/api/admin/v1/rejected-writes?limit=3").json as? [String: Any]
            #expect(Self.entries(first).count == 3)
            let next = try #require(first?["next"] as? Int)
            let rest = try await AdminCall.get(port: port, "/api/admin/v1/rejected-writes?limit=3&before=\(next)").json as? [String: Any]
            #expect(Self.entries(rest).count == 1)
            #expect(rest?["next"] is NSNull)
        }
    }

    @Test func retentionKeepsTheNewestEntriesPerUser() async throws {
        try await LiveServer.withServer(configure: { $0.syncLogRetention = SyncLogRetention(maxEntriesPerUser: 3, maxAgeDays: 30) }) { port in
            let device = try await OperationsDevice.connect(port: port, sdk: nil)
            try await device.subscribe()
            try await device.uploadWithRejections()
            let path = "/api/admin/v1/users/\(device.userId)/sync-log"
            // connection_opened, session_bound, subscription_changed, upload, 2 compensating writes: 6 recorded.
            try await AdminCall.eventually("the compensating writes in the log") {
                Self.entries(try await AdminCall.get(port: port, path + "?kind=compensating_write").json).count == 2
            }
            let log = Self.entries(try await AdminCall.get(port: port, path).json)
            #expect(log.count == 3)
            #expect(log.compactMap { $0["kind"] as? String } == ["compensating_write", "compensating_write", "upload"])
        }
    }
}
