import Crypto
import FerryAppConfig
import FerryCore
import FerryTestSupport
@testable import FerryServer
import Foundation
import Testing

/// Triggers (issue 24): every matching change of a class is POSTed to the trigger's webhook,
/// signed, in version order, at least once; failures are retried, too many pause the trigger
/// (admin API, metrics) until an admin resumes it, and a restart resumes where delivery
/// stopped. The receiver is a small HTTP server of the test's own.
@Suite("Server: triggers and their webhooks")
struct TriggerTests {
    static let secret = "a-trigger-signing-secret-of-32-bytes-or-more"

    /// The Data API's test app with one trigger, `items`, on Item.
    static func appDirectory(hookPort: Int, match: String? = "complexity > 1", maxFailures: Int = 3) throws -> String {
        let dir = try DataAPITests.appDirectory()
        try FileManager.default.createDirectory(atPath: dir + "/triggers", withIntermediateDirectories: true)
        let matchMember = match.map { #","match":"\#($0)""# } ?? ""
        try Data("""
            {"name": "items", "type": "DATABASE", "disabled": false, "max_failures": \(maxFailures),
             "config": {"collection": "Item", "operation_types": ["INSERT", "UPDATE", "DELETE"]\(matchMember)},
             "webhook": {"url": "http://127.0.0.1:\(hookPort)/hook", "secret_name": "FERRY_TRIGGER_SECRET_ITEMS"}}
            """.utf8).write(to: URL(fileURLWithPath: dir + "/triggers/items.json"))
        return dir
    }

    static func configure(_ c: inout ServerConfiguration, app: String, data: String) {
        c.appDirectory = app
        c.dataDirectory = data
        c.secrets["FERRY_DATA_API_KEY_BACKEND"] = DataAPITests.key
        c.secrets["FERRY_TRIGGER_SECRET_ITEMS"] = secret
        c.triggerTiming.retry = .milliseconds(20)
        c.triggerTiming.maxRetry = .milliseconds(100)
        c.triggerTiming.renew = .milliseconds(500)
        c.triggerTiming.lease = .seconds(2)
    }

    /// Whether a delivery's `Ferry-Signature` is the HMAC-SHA256 of "t.body" with the secret.
    static func verifies(_ r: WebhookReceiver.Request) -> Bool {
        guard let header = r.signature, header.hasPrefix("t="), let comma = header.firstIndex(of: ",") else { return false }
        let t = header[header.index(header.startIndex, offsetBy: 2)..<comma]
        let given = header[header.index(after: comma)...]
        let mac = HMAC<SHA256>.authenticationCode(for: Array("\(t).".utf8) + r.body, using: SymmetricKey(data: Array(secret.utf8)))
        return given == "v1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    static func trigger(_ port: Int) async throws -> [String: Any] {
        let list = try await AdminCall.get(port: port, "/api/admin/v1/triggers").json as? [String: Any]
        return ((list?["triggers"] as? [[String: Any]]) ?? []).first { $0["name"] as? String == "items" } ?? [:]
    }

    static func id(_ r: WebhookReceiver.Request) -> String { ((r.json["documentKey"] as? [String: Any])?["_id"] as? [String: Any])?["$oid"] as? String ?? "" }

    @Test func everyMatchingChangeArrivesSignedInOrderRetriedPausedResumedAndAfterARestart() async throws {
        let receiver = WebhookReceiver()
        let hookPort = try await receiver.start()
        let app = try Self.appDirectory(hookPort: hookPort)
        let data = NSTemporaryDirectory() + "ferry-trigger-\(UInt64.random(in: 0...UInt64.max))"
        defer { try? FileManager.default.removeItem(atPath: data) }
        let ids = (0..<5).map { "67a00000000000000000000\($0)" }
        var deliveredBeforeTheRestart: [String] = []
        try await LiveServer.withServer(configure: { Self.configure(&$0, app: app, data: data) }) { port in
            // A trigger delivers what changes after it started: wait until a node took it.
            try await AdminCall.eventually("the trigger to start") { try await Self.trigger(port)["started"] as? Bool == true }
            let inserted = try await DataAPIWriteTests.call(port, "insertMany", #"{"class":"Item","documents":[\#(ids.enumerated().map { DataAPIWriteTests.item($1, complexity: $0) }.joined(separator: ","))]}"#)
            let v1 = try #require(inserted.json["version"] as? Int)
            // complexity > 1: items 2, 3, 4.
            #expect(await receiver.waitFor(3))
            let first = receiver.requests
            #expect(first.map(Self.id) == Array(ids[2...]))   // one version, in key order
            #expect(first.allSatisfy { $0.json["operationType"] as? String == "insert" && $0.json["version"] as? Int == v1 })
            #expect(first.allSatisfy { ($0.json["by"] as? [String: String]) == ["key": "backend"] && $0.trigger == "items" && $0.json["class"] as? String == "Item" })
            #expect(first.allSatisfy(Self.verifies))
            #expect((first[0].json["fullDocument"] as? [String: Any])?["complexity"] as? Int == 2)

            // An update that matches, one that does not, a delete: in version order, the
            // second never.
            _ = try await DataAPIWriteTests.call(port, "updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(ids[4])"},"set":{"itemName":"renamed"}}"#)
            _ = try await DataAPIWriteTests.call(port, "updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(ids[0])"},"set":{"itemName":"quiet"}}"#)
            _ = try await DataAPIWriteTests.call(port, "deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(ids[3])"}}"#)
            #expect(await receiver.waitFor(5))
            let next = Array(receiver.requests[3...])
            #expect(next.map { "\(Self.id($0)) \($0.json["operationType"] as? String ?? "")" } == ["\(ids[4]) update", "\(ids[3]) delete"])
            #expect((next[0].json["fullDocument"] as? [String: Any])?["itemName"] as? String == "renamed")
            #expect(next[1].json["fullDocument"] is NSNull)
            #expect((next[0].json["version"] as? Int ?? 0) < (next[1].json["version"] as? Int ?? 0))
            #expect(next.allSatisfy(Self.verifies))

            // The receiver fails: three attempts (max_failures), then the trigger pauses.
            receiver.setFailing(true)
            let failing = "67a000000000000000000009"
            _ = try await DataAPIWriteTests.call(port, "insertOne", #"{"class":"Item","document":\#(DataAPIWriteTests.item(failing, complexity: 5))}"#)
            #expect(await receiver.waitFor(8))
            try await AdminCall.eventually("the trigger to pause") { try await Self.trigger(port)["paused"] as? Bool == true }
            let paused = try await Self.trigger(port)
            #expect(paused["failures"] as? Int == 3)
            #expect((paused["last_error"] as? String ?? "").contains("500"))
            #expect(paused["delivered"] as? Int == 5)
            #expect(receiver.requests.count == 8, "no attempt while paused")
            #expect(receiver.requests[5...].allSatisfy { Self.id($0) == failing && $0.answered == 500 })
            let metrics = try await MetricsTests.scrape(port: port, token: LiveServer.adminToken)
            #expect(MetricsTests.value(metrics, #"ferry_trigger_paused{trigger="items"}"#) == 1)
            #expect(MetricsTests.value(metrics, #"ferry_trigger_failures_total{trigger="items"}"#) == 3)
            #expect(MetricsTests.value(metrics, #"ferry_trigger_deliveries_total{trigger="items"}"#) == 5)

            // Resumed by an admin: the change that failed is delivered, once.
            receiver.setFailing(false)
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/triggers/items/resume").status == 204)
            #expect(try await AdminCall.call(port: port, "POST", "/api/admin/v1/triggers/nope/resume").status == 404)
            #expect(await receiver.waitFor(9))
            #expect(Self.id(receiver.requests[8]) == failing && receiver.requests[8].answered == 204)
            #expect(receiver.requests[8].json["id"] as? String == receiver.requests[5].json["id"] as? String)   // the same change, for dedup
            try await AdminCall.eventually("the cursor to move past it") {
                let t = try await Self.trigger(port)
                return t["paused"] as? Bool == false && t["failures"] as? Int == 0 && t["behind"] as? Int == 0
            }
            deliveredBeforeTheRestart = receiver.delivered.map(Self.id)
        }
        // A restart resumes where delivery stopped: nothing delivered twice, the next change once.
        try await LiveServer.withServer(configure: { Self.configure(&$0, app: app, data: data) }) { port in
            let after = "67a00000000000000000000a"
            _ = try await DataAPIWriteTests.call(port, "insertOne", #"{"class":"Item","document":\#(DataAPIWriteTests.item(after, complexity: 6))}"#)
            #expect(await receiver.waitFor(10))
            #expect(receiver.delivered.map(Self.id) == deliveredBeforeTheRestart + [after])
        }
        await receiver.stop()
    }

    @Test func aTriggerWithoutItsSecretOrAPlainHTTPURLElsewhereStopsTheStart() async throws {
        let app = try Self.appDirectory(hookPort: 9)
        var c = DataAPITests.configuration(app: app, data: NSTemporaryDirectory() + "ferry-trigger-bad-\(UInt64.random(in: 0...UInt64.max))")
        await #expect(throws: ServerStartError.self) { _ = try await FerryServer.make(c) }
        c.secrets["FERRY_TRIGGER_SECRET_ITEMS"] = "short"
        await #expect(throws: ServerStartError.self) { _ = try await FerryServer.make(c) }
        // http:// to another host: refused when the directory is read.
        try Data(#"{"name":"items","config":{"collection":"Item","operation_types":["INSERT"]},"webhook":{"url":"http://example.com/h","secret_name":"S"}}"#.utf8)
            .write(to: URL(fileURLWithPath: app + "/triggers/items.json"))
        #expect(throws: AppConfigurationError.self) { _ = try AppDirectory.load(app) }
    }
}

/// The trigger's pure decisions.
@Suite("Server: trigger decisions")
struct TriggerEventsTests {
    @Test func backoffDoublesUpToItsMaximum() {
        let waits = (1...12).map { TriggerEvents.backoff(failures: $0, base: .seconds(1), maximum: .seconds(300)) }
        #expect(Array(waits.prefix(9)) == [1, 2, 4, 8, 16, 32, 64, 128, 256].map { Duration.seconds($0) })
        #expect(waits.suffix(3).allSatisfy { $0 == .seconds(300) })
        #expect(TriggerEvents.backoff(failures: 10_000, base: .seconds(1), maximum: .seconds(300)) == .seconds(300))
    }

    @Test func theSignatureIsTheHMACOfTheTimeAndTheBody() {
        // RFC 4231's test case 2 key and data, with the time prefix: computed independently.
        let body = Array(#"{"a":1}"#.utf8)
        let expected = HMAC<SHA256>.authenticationCode(for: Array("1700000000.".utf8) + body, using: SymmetricKey(data: Array("Jefe".utf8)))
        #expect(TriggerEvents.signature(body: body, secret: Array("Jefe".utf8), time: 1_700_000_000)
                == "t=1700000000,v1=" + expected.map { String(format: "%02x", $0) }.joined())
        #expect(TriggerEvents.signature(body: body + [0x20], secret: Array("Jefe".utf8), time: 1_700_000_000)
                != TriggerEvents.signature(body: body, secret: Array("Jefe".utf8), time: 1_700_000_000))
    }

    @Test func anObjectCreatedSinceTheCursorIsAnInsertElseAnUpdate() throws {
        let app = try AppDirectory.load(AuthAPITests.example)
        let schema = try app.schema
        let os = try #require(schema.objectSchema(named: "Item"))
        let t = TriggerConfiguration(name: "t", className: "Item", operations: [.insert, .delete], match: "complexity > 1", url: "https://x", secretName: "S")
        let events = try TriggerEvents(t, schema: schema)
        func event(created: UInt64, changed: UInt64, complexity: Int64, erased: Bool = false) -> DataAPIChanges.Event {
            var values = os.properties.map(\.defaultValue)
            values[os.primaryKeyIndex] = .objectId(try! ObjectId(hex: "67a000000000000000000001"))
            values[os.propertyIndex(named: "complexity")!] = .int(complexity)
            var versions = values.map { _ in created }
            versions[os.propertyIndex(named: "complexity")!] = changed
            let object = StampedObject(values: values, stamps: values.map { _ in .zero }, versions: versions)
            return DataAPIChanges.Event(version: changed, objectSchema: os,
                                        change: .init(key: values[os.primaryKeyIndex], object: erased ? nil : object, erasedState: erased ? object : nil, version: changed))
        }
        #expect(events.operation(of: event(created: 5, changed: 5, complexity: 2), after: 4) == .insert)
        #expect(events.operation(of: event(created: 3, changed: 5, complexity: 2), after: 4) == .update)
        #expect(events.operation(of: event(created: 3, changed: 5, complexity: 2, erased: true), after: 4) == .delete)
        #expect(events.delivers(event(created: 5, changed: 5, complexity: 2), after: 4))
        #expect(!events.delivers(event(created: 5, changed: 5, complexity: 1), after: 4))      // no match
        #expect(!events.delivers(event(created: 3, changed: 5, complexity: 2), after: 4))      // updates not chosen
        #expect(events.delivers(event(created: 3, changed: 5, complexity: 9, erased: true), after: 4))   // a delete, matched on its last values
    }
}
