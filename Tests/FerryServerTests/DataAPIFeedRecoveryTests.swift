import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The change feed after a crash (issue 24): a `ferry-server` killed with SIGKILL while a
/// backend writes through the Data API, restarted on the same data, and a reader that resumes
/// the feed from the version it had read misses nothing that was acknowledged, sees nothing
/// twice and nothing out of version order, and sees a write the crash cut short whole or not
/// at all.
@Suite("Server: the Data API's change feed across a kill -9")
struct DataAPIFeedRecoveryTests {
    /// One NDJSON page of the feed after `after`: its events and where the next page starts.
    static func page(_ port: Int, after: Int) async throws -> (events: [[String: Any]], next: Int) {
        let response = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=\(after)&limit=7",
                                                    headers: ["apiKey": DataAPITests.key])
        let head = String(decoding: response, as: UTF8.self).lowercased()
        let line = try #require(head.split(separator: "\r\n").first { $0.hasPrefix("ferry-next-after:") })
        let next = try #require(Int(line.dropFirst("ferry-next-after:".count).trimmingCharacters(in: .whitespaces)))
        let events = (WireFormat.body(response) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        return (events, next)
    }

    /// Every event after `after`, page by page, until a page moves no further.
    static func readAll(_ port: Int, after: Int) async throws -> (events: [[String: Any]], through: Int) {
        var events: [[String: Any]] = []
        var position = after
        while true {
            let p = try await page(port, after: position)
            events += p.events
            if p.next == position { return (events, position) }
            position = p.next
        }
    }

    static func id(_ e: [String: Any]) -> String { (e["primaryKey"] as? [String: Any])?["$oid"] as? String ?? "" }

    @Test func aReaderResumesAfterTheServerWasKilledWithNothingMissingOrOutOfOrder() async throws {
        let app = try DataAPITests.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-feed-kill-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: data) }
        let secrets = ["FERRY_DATA_API_KEY_BACKEND": DataAPITests.key]
        func started(_ server: ServerExecutable) async throws -> Int {
            #expect(await DescriptorLimitTests.eventually(seconds: 60) { server.port != nil }, "the server did not start: \(server.log().suffix(2000))")
            return try #require(server.port)
        }

        // Before the crash: ten batches of three objects, each batch one version, and a
        // reader that has read part of the feed.
        let first = try ServerExecutable("feed-kill-1", appDirectory: app, dataDirectory: data, arguments: [], environment: secrets)
        let port1 = try await started(first)
        /// Batch n's three ids (n < 1000).
        func batch(_ n: Int) -> [String] { (0..<3).map { String(format: "66%07d%015d", n, $0) } }
        var acknowledged: [Int: Int] = [:]   // batch → the version its write committed as
        for n in 0..<10 {
            let answer = try await DataAPIWriteTests.call(port1, "insertMany", #"{"class":"Item","documents":[\#(batch(n).map { DataAPIWriteTests.item($0, complexity: n) }.joined(separator: ","))]}"#)
            #expect(answer.status == 200)
            acknowledged[n] = try #require(answer.json["version"] as? Int)
        }
        // limit 7: whole versions until seven events are reached, so three batches.
        let read = try await Self.page(port1, after: 0)
        #expect(read.events.count == 9)
        #expect(read.next == acknowledged[2])
        let cursor = read.next

        // A writer keeps writing batches while the server is killed under it.
        let writer = Task { () -> [Int: Int] in
            var done: [Int: Int] = [:]
            for n in 10..<1000 {
                guard let answer = try? await DataAPIWriteTests.call(port1, "insertMany",
                                                                     #"{"class":"Item","documents":[\#(batch(n).map { DataAPIWriteTests.item($0, complexity: n % 7) }.joined(separator: ","))]}"#),
                      answer.status == 200, let v = answer.json["version"] as? Int else { break }
                done[n] = v
            }
            return done
        }
        // Killed once it wrote at least ten batches more (the count is read, not slept on).
        var counted = 0
        let deadline = Date().addingTimeInterval(60)
        while counted < 60, Date() < deadline {
            counted = (try? await DataAPIWriteTests.call(port1, "count", #"{"class":"Item"}"#).json["count"] as? Int) ?? counted
        }
        #expect(counted >= 60)
        kill(first.pid, SIGKILL)
        first.process.waitUntilExit()
        let duringTheCrash = await writer.value
        acknowledged.merge(duringTheCrash) { a, _ in a }
        #expect(duringTheCrash.count >= 10)

        // After the restart: the reader resumes from its cursor.
        let second = try ServerExecutable("feed-kill-2", appDirectory: app, dataDirectory: data, arguments: [], environment: secrets)
        let port2 = try await started(second)
        let resumed = try await Self.readAll(port2, after: cursor)
        let versions = resumed.events.compactMap { $0["version"] as? Int }
        #expect(versions.count == resumed.events.count)
        #expect(versions == versions.sorted(), "out of version order")
        #expect(versions.allSatisfy { $0 > cursor }, "an event the reader had already read")
        let ids = resumed.events.map(Self.id)
        #expect(Set(ids).count == ids.count, "an object twice")
        // The oracle: every acknowledged batch after the cursor, whole, at the version its
        // write was acknowledged with; of a batch the crash cut short, all or nothing.
        let byId = Dictionary(resumed.events.map { (Self.id($0), $0) }) { a, _ in a }
        for (n, version) in acknowledged where version > cursor {
            for id in batch(n) {
                #expect(byId[id]?["version"] as? Int == version, "batch \(n)'s \(id) (acknowledged at \(version))")
                #expect(byId[id]?["operation"] as? String == "upsert")
            }
        }
        for n in 0..<1000 where acknowledged[n] == nil {
            let present = batch(n).filter { byId[$0] != nil }.count
            #expect(present == 0 || present == 3, "batch \(n) half-written: \(present) of 3")
        }
        #expect((0...2).allSatisfy { n in batch(n).allSatisfy { byId[$0] == nil } })
        #expect(resumed.events.count >= 3 * acknowledged.filter { $0.value > cursor }.count)
        second.stop()
    }
}
