import FerryCore
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
@testable import FerryServer

/// The Data API's writes (issue 24): each call is one changeset merged like a device's upload,
/// checked against the schema, applied whole or not at all, and sent to the devices whose
/// view it touches.
@Suite("Server: Data API writes")
struct DataAPIWriteTests {
    let withKey: HTTPFields = [DataAPIKeys.header: DataAPITests.key]
    let base = DataAPITests.base

    func json(_ r: TestResponse) throws -> [String: Any] { try #require(try JSONSerialization.jsonObject(with: Data(buffer: r.body)) as? [String: Any]) }

    /// A live server of the Item app with the Data API on and `DataAPITests.key`.
    static func withLiveServer(_ body: (Int) async throws -> Void) async throws {
        let app = try DataAPITests.appDirectory()
        try await LiveServer.withServer(configure: {
            $0.appDirectory = app
            $0.secrets["FERRY_DATA_API_KEY_BACKEND"] = DataAPITests.key
        }, body)
    }

    /// One Data API call on a live server, with the server key or a user's token.
    static func call(_ port: Int, _ action: String, _ body: String, token: String? = nil) async throws -> (status: Int, json: [String: Any], text: String) {
        let credentials = token.map { ["Authorization": "Bearer \($0)"] } ?? ["apiKey": DataAPITests.key]
        let response = try await LiveServer.request(port: port, "POST", "\(DataAPITests.base)/\(action)",
                                                    headers: credentials.merging(["Content-Type": "application/json"]) { $1 }, body: body)
        let text = WireFormat.body(response) ?? ""
        let json = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        return (WireFormat.response(response)?.status ?? 0, json, text)
    }

    static func item(_ id: String, owner: String = "o1", complexity: Int = 2, name: String = "thing") -> String {
        #"{"_id":{"$oid":"\#(id)"},"ownerId":"\#(owner)","itemName":"\#(name)","complexity":\#(complexity)}"#
    }

    @Test func insertUpdateDeleteAndATransactionThatIsAllOrNothing() async throws {
        let app = try DataAPITests.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-data-api-w-\(UInt64.random(in: 0...UInt64.max))"
        try await FerryServer.make(DataAPITests.configuration(app: app, data: data)).test(.router) { client in
            func post(_ action: String, _ body: String) async throws -> (HTTPResponse.Status, [String: Any]) {
                try await client.execute(uri: "\(base)/\(action)", method: .post, headers: withKey, body: ByteBuffer(string: body)) { r in
                    (r.status, (try? json(r)) ?? [:])
                }
            }
            func find(_ id: String) async throws -> [String: Any]? {
                try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(id)"}}"#).1["document"] as? [String: Any]
            }
            let a = "65a000000000000000000001", b = "65a000000000000000000002", c = "65a000000000000000000003"
            let inserted = try await post("insertOne", #"{"class":"Item","document":\#(Self.item(a))}"#)
            #expect(inserted.0 == .ok)
            #expect((inserted.1["insertedId"] as? [String: Any])?["$oid"] as? String == a)
            #expect(try await find(a)?["itemName"] as? String == "thing")

            let many = try await post("insertMany", #"{"class":"Item","documents":[\#(Self.item(b, complexity: 5)),\#(Self.item(c))]}"#)
            #expect((many.1["insertedIds"] as? [Any])?.count == 2)

            let updated = try await post("updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(b)"},"set":{"itemName":"renamed"},"inc":{"complexity":-3}}"#)
            #expect(updated.1["matchedCount"] as? Int == 1)
            #expect(updated.1["modifiedCount"] as? Int == 1)
            #expect(try await find(b)?["itemName"] as? String == "renamed")
            #expect(try await find(b)?["complexity"] as? Int == 2)
            let missing = try await post("updateOne", #"{"class":"Item","primaryKey":{"$oid":"65a0000000000000000000ff"},"set":{"itemName":"x"}}"#)
            #expect(missing.1["matchedCount"] as? Int == 0)
            #expect(try await find("65a0000000000000000000ff") == nil)

            #expect(try await post("deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(c)"}}"#).1["deletedCount"] as? Int == 1)
            #expect(try await find(c) == nil)
            #expect(try await post("deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(c)"}}"#).1["deletedCount"] as? Int == 0)

            // A transaction whose last operation breaks the schema: refused whole.
            let d = "65a000000000000000000004"
            let refused = try await post("transaction", #"{"operations":[{"action":"insertOne","class":"Item","document":\#(Self.item(d))},{"action":"deleteOne","class":"Item","primaryKey":{"$oid":"\#(a)"}},{"action":"updateOne","class":"Item","primaryKey":{"$oid":"\#(b)"},"set":{"complexity":"high"}}]}"#)
            #expect(refused.0 == .badRequest)
            #expect((refused.1["error"] as? String)?.contains("operation 2") == true)
            #expect(try await find(d) == nil)
            #expect(try await find(a) != nil)
            // The same without the bad operation: all of it.
            let done = try await post("transaction", #"{"operations":[{"action":"insertOne","class":"Item","document":\#(Self.item(d))},{"action":"deleteOne","class":"Item","primaryKey":{"$oid":"\#(a)"}}]}"#)
            #expect(done.0 == .ok)
            #expect(try await find(d) != nil)
            #expect(try await find(a) == nil)

            // What the schema refuses, with a reason.
            for body in [#"{"class":"Item","document":{"_id":{"$oid":"65a000000000000000000005"},"ownerId":"o1","itemName":"x"}}"#,   // complexity missing
                         #"{"class":"Item","document":{"_id":{"$oid":"65a000000000000000000005"},"ownerId":"o1","itemName":"x","complexity":1.5}}"#,
                         #"{"class":"Item","document":{"_id":{"$oid":"65a000000000000000000005"},"ownerId":null,"itemName":"x","complexity":1}}"#,
                         #"{"class":"Item","document":{"_id":{"$oid":"65a000000000000000000005"},"ownerId":"o1","itemName":"x","complexity":1,"color":"red"}}"#,
                         #"{"class":"Item","document":{"ownerId":"o1","itemName":"x","complexity":1}}"#] {
                let r = try await post("insertOne", body)
                #expect(r.0 == .badRequest, "\(body)")
                #expect(!((r.1["error"] as? String) ?? "").isEmpty)
            }
            #expect(try await find("65a000000000000000000005") == nil)
            // Without the key: refused, nothing written.
            try await client.execute(uri: "\(base)/insertOne", method: .post, body: ByteBuffer(string: #"{"class":"Item","document":\#(Self.item("65a000000000000000000006"))}"#)) {
                #expect($0.status == .unauthorized)
            }
            #expect(try await find("65a000000000000000000006") == nil)
        }
    }

    /// A backend's insert reaches the device whose view it enters, and not a device of
    /// another user; its delete erases it there; what a device writes, the backend reads.
    @Test func backendWritesReachTheDevicesWhoseViewTheyTouch() async throws {
        try await Self.withLiveServer { port in
            let ann = try await OperationsDevice.connect(port: port, sdk: nil)
            let bob = try await OperationsDevice.connect(port: port, sdk: nil)
            try await ann.subscribe()
            try await bob.subscribe()
            func post(_ action: String, _ body: String) async throws -> String { try await Self.call(port, action, body).text }
            let id = try ObjectId(hex: "65b000000000000000000001")
            let other = try ObjectId(hex: "65b000000000000000000002")
            _ = try await post("insertMany", #"{"class":"Item","documents":[\#(Self.item(id.description, owner: ann.userId)),\#(Self.item(other.description, owner: "someone-else"))]}"#)
            try await ann.waitFor("the backend's insert") { m in BootstrapWindowTests.keys(in: [m]).contains(.objectId(id)) }
            #expect(!BootstrapWindowTests.keys(in: ann.messages).contains(.objectId(other)))
            _ = try await post("deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(id.description)"}}"#)
            try await ann.waitFor("the backend's delete") { m in
                guard case .download(_, _, _, _, _, _, let changesets) = m else { return false }
                return changesets.contains { c in ((try? ChangesetCodec.decode(c.changeset).instructions) ?? []).contains { $0 == .erase(table: "Item", key: .objectId(id)) } }
            }
            // Bob saw none of Ann's objects.
            #expect(!BootstrapWindowTests.keys(in: bob.messages).contains(.objectId(id)))
            // A device's write, read by the backend.
            let mine = try ObjectId(hex: "65b000000000000000000003")
            try await ann.client.send(WireFormat.message(.upload(session: 1, changesets: [
                UploadChangeset(clientVersion: 1, lastIntegratedServerVersion: 0,
                                changeset: ChangesetCodec.encode(Changeset(timestamp: 1, instructions: [OperationsDevice.create(mine, owner: ann.userId, complexity: 1)]))),
            ])))
            try await ann.waitFor("the acknowledgement") { if case .download(_, _, let ack, _, _, _, _) = $0 { return ack >= 1 } else { return false } }
            let read = try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(mine.description)"}}"#)
            #expect(read.contains(ann.userId))
            // The change feed says who made each change: the device's user, the backend's key.
            let feed = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=0", headers: ["apiKey": DataAPITests.key])
            let events = (WireFormat.body(feed) ?? "").split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            func by(_ id: ObjectId) -> [String: String]? {
                events.first { ($0["primaryKey"] as? [String: Any])?["$oid"] as? String == id.description }?["by"] as? [String: String]
            }
            #expect(by(mine) == ["user": ann.userId])
            #expect(by(id) == ["key": "backend"])     // the delete
            #expect(by(other) == ["key": "backend"])
        }
    }

    /// A backend write and a device write to the same field resolve by the same rules as two
    /// devices' writes: a write made at a version that includes the other supersedes it (a
    /// Data API write is made at the head); two writes that did not see each other are
    /// concurrent and the later changeset time wins. The oracle is those rules; the store
    /// (read through the Data API) and a second device's bootstrap must both show the answer.
    @Test func aBackendWriteAndADeviceWriteToOneFieldConvergeByTheSameRule() async throws {
        try await Self.withLiveServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let device = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            try await device.subscribe()
            func post(_ action: String, _ body: String) async throws -> String { try await Self.call(port, action, body).text }
            let id = try ObjectId(hex: "65c000000000000000000001")
            _ = try await post("insertOne", #"{"class":"Item","document":\#(Self.item(id.description, owner: user.id, name: "start"))}"#)
            try await device.waitFor("the backend's insert") { m in BootstrapWindowTests.keys(in: [m]).contains(.objectId(id)) }
            var clientVersion: UInt64 = 0
            func deviceSets(_ name: String, at timestamp: Int64) async throws {
                clientVersion += 1
                let v = clientVersion
                try await device.client.send(WireFormat.message(.upload(session: 1, changesets: [
                    UploadChangeset(clientVersion: v, lastIntegratedServerVersion: 0, changeset: ChangesetCodec.encode(Changeset(
                        timestamp: timestamp, instructions: [.set(table: "Item", key: .objectId(id), field: "itemName", value: .string(name))]))),
                ])))
                try await device.waitFor("the acknowledgement of \(v)") { if case .download(_, _, let ack, _, _, _, _) = $0 { return ack >= v } else { return false } }
            }
            func stored() async throws -> String? {
                let body = try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(id.description)"}}"#)
                let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
                return (json?["document"] as? [String: Any])?["itemName"] as? String
            }
            let now = WallClock.system.nanosecondsSinceEpoch()
            // 1. The device's write arrives last but was made earlier (10 s before): the
            //    backend's value stays.
            try await deviceSets("device, earlier", at: now - 10_000_000_000)
            #expect(try await stored() == "start")
            // 2. A Data API write is made at the head: it supersedes what is committed.
            _ = try await post("updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(id.description)"},"set":{"itemName":"backend"}}"#)
            #expect(try await stored() == "backend")
            // 3. A device write made without having seen it (its base is older) is concurrent
            //    with it, and was made later (0.5 s ahead): the device's value wins.
            try await deviceSets("device, later", at: WallClock.system.nanosecondsSinceEpoch() + 500_000_000)
            let oracle = "device, later"
            #expect(try await stored() == oracle)
            // Every replica: a second device of the user bootstraps the same value.
            let second = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            try await second.subscribe()
            try await second.waitFor("the bootstrap") { if case .download(_, _, _, _, _, true, _) = $0 { return true } else { return false } }
            var names: [String] = []
            for case .download(_, _, _, _, _, _, let changesets) in second.messages {
                for c in changesets {
                    for case .create(_, .objectId(id), let fields) in (try? ChangesetCodec.decode(c.changeset).instructions) ?? [] {
                        for f in fields where f.name == "itemName" { if case .string(let n) = f.value { names.append(n) } }
                    }
                }
            }
            #expect(names == [oracle], "\(second.messages)")
        }
    }

    /// The change feed: every object changed after a version, once, at its last version, in
    /// version order; a version is never split across pages; an SSE stream hears new writes
    /// as they commit and resumes after its last event id.
    @Test func theChangeFeedListsWhatChangedAndAStreamFollowsIt() async throws {
        try await Self.withLiveServer { port in
            func post(_ action: String, _ body: String) async throws -> [String: Any] { try await Self.call(port, action, body).json }
            func changes(_ query: String) async throws -> [[String: Any]] {
                let response = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?\(query)", headers: ["apiKey": DataAPITests.key])
                return (WireFormat.body(response) ?? "").split(separator: "\n").compactMap {
                    try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                }
            }
            let ids = (1...5).map { "65d00000000000000000000\($0)" }
            let v1 = try #require(try await post("insertMany", #"{"class":"Item","documents":[\#(ids.map { Self.item($0) }.joined(separator: ","))]}"#)["version"] as? Int)
            let v2 = try #require(try await post("updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(ids[0])"},"set":{"itemName":"changed"}}"#)["version"] as? Int)
            let v3 = try #require(try await post("deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(ids[1])"}}"#)["version"] as? Int)
            #expect(v1 < v2 && v2 < v3)
            let all = try await changes("after=0")
            // The oracle: each object once, at the version of its last change.
            let expected: [(String, Int, String)] = ids[2...].map { ($0, v1, "upsert") } + [(ids[0], v2, "upsert"), (ids[1], v3, "delete")]
            let got: [String] = all.map { e in
                let id = (e["primaryKey"] as? [String: Any])?["$oid"] as? String ?? ""
                return "\(id)@\(e["version"] as? Int ?? 0):\(e["operation"] as? String ?? "")"
            }
            #expect(got == expected.map { "\($0.0)@\($0.1):\($0.2)" })
            #expect((all.first { $0["version"] as? Int == v2 }?["document"] as? [String: Any])?["itemName"] as? String == "changed")
            #expect(try await changes("after=\(v2)").count == 1)
            #expect(all.allSatisfy { $0["by"] as? [String: String] == ["key": "backend"] })
            // A version beyond the head is no cursor of this app: refused, not silently empty.
            let beyond = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=\(v3 + 1000)", headers: ["apiKey": DataAPITests.key])
            #expect(WireFormat.response(beyond)?.status == 400)
            #expect((WireFormat.body(beyond) ?? "").contains("InvalidVersion"))
            // limit=1: the first page is all of version v1 (three objects), never part of it.
            #expect(try await changes("after=0&limit=1").map { $0["version"] as? Int } == [v1, v1, v1])
            let refused = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=x", headers: ["apiKey": DataAPITests.key])
            #expect(WireFormat.response(refused)?.status == 400)

            // A stream from v3: it hears the next write, and only it.
            let stream = try await RawClient.connect(port: port)
            try await stream.send("GET /api/data/v1/app/item-app-seeds/changes HTTP/1.1\r\nHost: 127.0.0.1\r\napiKey: \(DataAPITests.key)\r\nAccept: text/event-stream\r\nLast-Event-ID: \(v3)\r\n\r\n")
            let v4 = try #require(try await post("insertOne", #"{"class":"Item","document":\#(Self.item("65d000000000000000000009"))}"#)["version"] as? Int)
            let heard = await stream.wait(seconds: 60) { received, _ in String(decoding: received, as: UTF8.self).contains("id: \(v4)\n") }
            #expect(heard)
            let text = String(decoding: stream.received, as: UTF8.self)
            #expect(text.contains("text/event-stream"))
            #expect(text.contains("65d000000000000000000009"))
            #expect(!text.contains("id: \(v3)\n"))
            await stream.close()
        }
    }

    /// `set` of a list property replaces the whole list (cleared, then each element inserted).
    @Test func setPushAndPullEditAList() async throws {
        let app = NSTemporaryDirectory() + "ferry-data-api-lists-\(UInt64.random(in: 0...UInt64.max))"
        let fixture = URL(fileURLWithPath: AuthAPITests.example).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/Fixtures/data-api-app").path
        try FileManager.default.copyItem(atPath: fixture, toPath: app)
        try Data(#"{"disabled": false, "server_keys": [{"name": "backend", "secret_name": "FERRY_DATA_API_KEY_BACKEND"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: app + "/http_endpoints/data_api_config.json"))
        try await LiveServer.withServer(configure: {
            $0.appDirectory = app
            $0.secrets["FERRY_DATA_API_KEY_BACKEND"] = DataAPITests.key
        }) { port in
            let id = "65c000000000000000000001"
            let reading = #"{"_id":{"$oid":"\#(id)"},"ownerId":"o","label":"l","value":1,"ratio":0.5,"taken":{"$date":"2026-11-29T10:00:00Z"},"blob":{"$binary":{"base64":"AA==","subType":"00"}},"samples":[1,2,3]}"#
            #expect(try await Self.call(port, "insertOne", #"{"class":"Reading","document":\#(reading)}"#).status == 200)
            func samples() async throws -> [Int]? {
                ((try await Self.call(port, "findOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"}}"#).json["document"] as? [String: Any])?["samples"] as? [Int])
            }
            #expect(try await samples() == [1, 2, 3])
            let set = try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"set":{"samples":[4,5]}}"#)
            #expect(set.status == 200 && set.json["modifiedCount"] as? Int == 1)
            #expect(try await samples() == [4, 5])
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"set":{"samples":[]}}"#).status == 200)
            #expect(try await samples() == [])
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"set":{"samples":7}}"#).status == 400)
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"set":{"samples":["x"]}}"#).status == 400)
            #expect(try await samples() == [])

            // push appends, pull removes every element equal to one given.
            let pushed = try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"push":{"samples":[1,2,2,3]}}"#)
            #expect(pushed.status == 200 && pushed.json["modifiedCount"] as? Int == 1)
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"push":{"samples":[4]}}"#).status == 200)
            #expect(try await samples() == [1, 2, 2, 3, 4])
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"pull":{"samples":[2,4,9]}}"#).status == 200)
            #expect(try await samples() == [1, 3])
            // Nothing to pull: matched, not modified, nothing written.
            let nothing = try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"pull":{"samples":[9]}}"#)
            #expect(nothing.status == 200 && nothing.json["matchedCount"] as? Int == 1 && nothing.json["modifiedCount"] as? Int == 0)
            // With set in one transaction: the label set, the list edited, one version.
            let both = try await Self.call(port, "transaction", #"{"operations":[{"action":"updateOne","class":"Reading","primaryKey":{"$oid":"\#(id)"},"set":{"label":"m"},"push":{"samples":[5]},"pull":{"samples":[1]}}]}"#)
            #expect(both.status == 200)
            #expect(try await samples() == [3, 5])
            // Refused: not a list, not an array of the element type. An object that does not
            // exist is not matched, and nothing is created.
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"push":{"label":["x"]}}"#).status == 400)
            #expect(try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(id)"},"pull":{"samples":["x"]}}"#).status == 400)
            let missing = "65c0000000000000000000ff"
            let none = try await Self.call(port, "updateOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(missing)"},"push":{"samples":[1]}}"#)
            #expect(none.status == 200 && none.json["matchedCount"] as? Int == 0)
            #expect(try await Self.call(port, "findOne", #"{"class":"Reading","primaryKey":{"$oid":"\#(missing)"}}"#).json["document"] is NSNull)
            #expect(try await samples() == [3, 5])
        }
    }

    /// A server key declared with a role runs as that role of the app's rules (whatever its
    /// `apply_when`): it reads what the role reads, writes what it may write, and a write it
    /// may not make is refused whole with 403. A role no collection declares stops the start.
    @Test func aServerKeyWithARoleHasExactlyThatRolesRights() async throws {
        let app = try DataAPITests.appDirectory()
        let rules = app + "/data_sources/mongodb-atlas/todo/Item/rules.json"
        try Data(#"""
            {"collection": "Item", "database": "todo", "roles": [
              {"name": "office", "apply_when": {"%%user.custom_data.office": true}, "read": true, "write": true, "insert": false, "delete": false},
              {"name": "owner-read-write", "apply_when": {}, "document_filters": {"read": {"ownerId": "%%user.id"}, "write": {"ownerId": "%%user.id"}},
               "read": true, "write": true, "insert": true, "delete": true}]}
            """#.utf8).write(to: URL(fileURLWithPath: rules))
        let officeKey = "an-office-data-api-key-of-32-bytes-or-more"
        func keys(_ role: String) throws {
            try Data("""
                {"disabled": false, "server_keys": [{"name": "backend", "secret_name": "FERRY_DATA_API_KEY_BACKEND"},
                 {"name": "office", "secret_name": "FERRY_DATA_API_KEY_OFFICE", "role": "\(role)"}]}
                """.utf8).write(to: URL(fileURLWithPath: app + "/http_endpoints/data_api_config.json"))
        }
        try keys("nobody-declares-this")
        let data = NSTemporaryDirectory() + "ferry-data-api-role-\(UInt64.random(in: 0...UInt64.max))"
        await #expect(throws: ServerStartError.self) {
            _ = try await FerryServer.make(DataAPITests.configuration(app: app, data: data, secrets: [
                "FERRY_DATA_API_KEY_BACKEND": DataAPITests.key, "FERRY_DATA_API_KEY_OFFICE": officeKey]))
        }
        try keys("office")
        try await LiveServer.withServer(configure: {
            $0.appDirectory = app
            $0.secrets["FERRY_DATA_API_KEY_BACKEND"] = DataAPITests.key
            $0.secrets["FERRY_DATA_API_KEY_OFFICE"] = officeKey
        }) { port in
            func office(_ action: String, _ body: String) async throws -> (status: Int, json: [String: Any]) {
                let response = try await LiveServer.request(port: port, "POST", "\(DataAPITests.base)/\(action)",
                                                            headers: ["apiKey": officeKey, "Content-Type": "application/json"], body: body)
                let json = (try? JSONSerialization.jsonObject(with: Data((WireFormat.body(response) ?? "").utf8)) as? [String: Any]) ?? [:]
                return (WireFormat.response(response)?.status ?? 0, json)
            }
            let (a, b) = ("65d000000000000000000001", "65d000000000000000000002")
            #expect(try await Self.call(port, "insertMany", #"{"class":"Item","documents":[\#(Self.item(a, owner: "o1")),\#(Self.item(b, owner: "o2"))]}"#).status == 200)
            // Reads everything the role reads (no filter), as a user of that role would.
            let found = try await office("find", #"{"class":"Item","filter":"TRUEPREDICATE"}"#)
            #expect(found.status == 200 && (found.json["documents"] as? [[String: Any]])?.count == 2)
            // Writes what it may write.
            let updated = try await office("updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(a)"},"set":{"itemName":"checked"}}"#)
            #expect(updated.status == 200 && updated.json["modifiedCount"] as? Int == 1)
            // Not what it may not: no insert, no delete; nothing of either written.
            #expect(try await office("insertOne", #"{"class":"Item","document":\#(Self.item("65d000000000000000000003"))}"#).status == 403)
            #expect(try await office("deleteOne", #"{"class":"Item","primaryKey":{"$oid":"\#(b)"}}"#).status == 403)
            let after = try await Self.call(port, "find", #"{"class":"Item","filter":"TRUEPREDICATE"}"#)
            let names = Dictionary(uniqueKeysWithValues: ((after.json["documents"] as? [[String: Any]]) ?? []).compactMap { d -> (String, String)? in
                guard let id = (d["_id"] as? [String: Any])?["$oid"] as? String, let name = d["itemName"] as? String else { return nil }
                return (id, name)
            })
            #expect(names == [a: "checked", b: "thing"])
        }
    }

    /// A user's access token gets exactly that user's rules: reads show only what the user
    /// may read, a write the rules refuse is refused whole with 403 and the rule's reason.
    @Test func aUsersTokenReadsAndWritesWithThatUsersRules() async throws {
        try await Self.withLiveServer { port in
            let ann = try await LiveServer.anonymousUser(port: port)
            let bob = try await LiveServer.anonymousUser(port: port)
            func post(_ action: String, _ body: String, token: String? = nil) async throws -> (Int, [String: Any]) {
                let answer = try await Self.call(port, action, body, token: token)
                return (answer.status, answer.json)
            }
            func exists(_ id: String) async throws -> Bool {
                try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(id)"}}"#).1["document"] is [String: Any]
            }
            let annsItem = "65e000000000000000000001", bobsItem = "65e000000000000000000002"
            _ = try await post("insertMany", #"{"class":"Item","documents":[\#(Self.item(annsItem, owner: ann.id)),\#(Self.item(bobsItem, owner: bob.id))]}"#)

            let found = try await post("find", #"{"class":"Item"}"#, token: ann.token)
            #expect(found.0 == 200)
            #expect((found.1["documents"] as? [[String: Any]])?.compactMap { $0["ownerId"] as? String } == [ann.id])
            #expect(try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(bobsItem)"}}"#, token: ann.token).1["document"] is NSNull)
            let feed = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=0", headers: ["Authorization": "Bearer \(ann.token)"])
            #expect((WireFormat.body(feed) ?? "").contains(annsItem))
            #expect(!(WireFormat.body(feed) ?? "").contains(bobsItem))

            // Her own object: allowed.
            let mine = "65e000000000000000000003"
            let own = try await post("insertOne", #"{"class":"Item","document":\#(Self.item(mine, owner: ann.id))}"#, token: ann.token)
            #expect(own.0 == 200)
            // To Bob that version holds nothing he may see: no line, and still where to go on.
            let version = try #require(own.1["version"] as? Int)
            let bobsFeed = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=\(version - 1)",
                                                        headers: ["Authorization": "Bearer \(bob.token)"])
            #expect(String(decoding: bobsFeed, as: UTF8.self).lowercased().contains("ferry-next-after: \(version)\r\n"))
            #expect((WireFormat.body(bobsFeed) ?? "x").isEmpty)
            #expect(try await exists(mine))
            // Her write, in the feed, is hers (not a shared file's, not the server's).
            let annsFeed = try await LiveServer.request(port: port, "GET", "/api/data/v1/app/item-app-seeds/changes?after=\(version - 1)",
                                                        headers: ["Authorization": "Bearer \(ann.token)"])
            let event = try #require(try JSONSerialization.jsonObject(with: Data((WireFormat.body(annsFeed) ?? "").utf8)) as? [String: Any])
            #expect(event["by"] as? [String: String] == ["user": ann.id])
            // Bob's: refused whole, with the rule's reason, and nothing written.
            let theirs = "65e000000000000000000004"
            let refused = try await post("insertOne", #"{"class":"Item","document":\#(Self.item(theirs, owner: bob.id))}"#, token: ann.token)
            #expect(refused.0 == 403)
            #expect(!((refused.1["error"] as? String) ?? "").isEmpty)
            #expect(try await !exists(theirs))
            let mixed = "65e000000000000000000005"
            let transaction = try await post("transaction", #"{"operations":[{"action":"insertOne","class":"Item","document":\#(Self.item(mixed, owner: ann.id))},{"action":"insertOne","class":"Item","document":\#(Self.item(theirs, owner: bob.id))}]}"#, token: ann.token)
            #expect(transaction.0 == 403)
            #expect(try await !exists(mixed))
            // An object she may not read is, to her, one that does not exist: no match, no
            // change, and nothing said about it (as for a device's write).
            let hidden = try await post("updateOne", #"{"class":"Item","primaryKey":{"$oid":"\#(bobsItem)"},"set":{"itemName":"mine now"}}"#, token: ann.token)
            #expect(hidden.0 == 200)
            #expect(hidden.1["matchedCount"] as? Int == 0)
            #expect(try await post("findOne", #"{"class":"Item","primaryKey":{"$oid":"\#(bobsItem)"}}"#).1["document"].flatMap { ($0 as? [String: Any])?["itemName"] as? String } == "thing")
            // A wrong token: 401.
            #expect(try await post("find", #"{"class":"Item"}"#, token: "not-a-token").0 == 401)

            // Every call is in the sync log of whoever made it, with its answer's status and
            // what it wrote; a call without valid credentials is no one's.
            let annsLog = SyncLogAPITests.entries(try await AdminCall.get(port: port, "/api/admin/v1/users/\(ann.id)/sync-log?kind=data_api").json)
            func actions(_ log: SyncLogAPITests.Entries) -> [String] {
                log.compactMap { e in
                    guard let d = e["details"] as? [String: Any], let a = d["action"] as? String, let s = d["status"] as? Int else { return nil }
                    return "\(a) \(s)" + ((d["version"] as? Int).map { " v\($0)" } ?? "")
                }.sorted()
            }
            // (Her updateOne of Bob's object changed nothing: its version is the head's.)
            #expect(actions(annsLog) == ["changes 200", "changes 200", "find 200", "findOne 200", "insertOne 200 v\(version)", "insertOne 403",
                                         "transaction 403", "updateOne 200 v\(version)"])
            let keysLog = SyncLogAPITests.entries(try await AdminCall.get(port: port, "/api/admin/v1/users/data-api:backend/sync-log?kind=data_api").json)
            #expect(actions(keysLog).contains { $0.hasPrefix("insertMany 200 v") })
            #expect(actions(keysLog).filter { $0.hasPrefix("findOne 200") }.count >= 4)
        }
    }
}
