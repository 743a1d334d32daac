import FerryAppConfig
import FerryCore
import FerrySQLiteStorage
import FerrySyncStorage
import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
@testable import FerryServer

/// The Data API's reads (issue 24, first part): a backend with a server key finds objects
/// with a filter, page by page, and gets one by primary key; everyone else is refused.
@Suite("Server: Data API reads")
struct DataAPITests {
    static let key = "a-data-api-server-key-of-32-bytes-or-more"
    static let base = "/api/data/v1/app/item-app-seeds/action"

    /// The seeds' Item app with the Data API on and one server key.
    static func appDirectory(disabled: Bool = false) throws -> String {
        let dir = NSTemporaryDirectory() + "ferry-data-api-app-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.copyItem(atPath: AuthAPITests.example, toPath: dir)
        try FileManager.default.createDirectory(atPath: dir + "/http_endpoints", withIntermediateDirectories: true)
        try Data("""
            {"disabled": \(disabled), "versions": ["v1"], "return_type": "EJSON",
             "server_keys": [{"name": "backend", "secret_name": "FERRY_DATA_API_KEY_BACKEND"}]}
            """.utf8).write(to: URL(fileURLWithPath: dir + "/http_endpoints/data_api_config.json"))
        return dir
    }

    static func configuration(app: String, data: String, secrets extra: [String: String] = ["FERRY_DATA_API_KEY_BACKEND": key]) -> ServerConfiguration {
        var c = ServerConfiguration(appDirectory: app, dataDirectory: data, secrets: ["jwtSigningKey": AuthAPITests.jwtKey].merging(extra) { $1 })
        c.passwordHashing = .fastForTests
        return c
    }

    /// What the backend expects to read: n's id, owner and complexity.
    struct Oracle {
        var ids: [UInt8: ObjectId] = [:]
        func complexity(_ n: UInt8) -> Int64 { Int64(n % 7) }
    }

    /// Items 1...count stored before the server starts (as devices would have uploaded them).
    static func seed(_ data: String, app: String, count: UInt8) async throws -> Oracle {
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let os = try #require(try AppDirectory.load(app).schema.objectSchema(named: "Item"))
        let store = try SQLiteSyncStorage(path: data + "/sync.sqlite")
        var oracle = Oracle()
        var objects: [ObjectKey: StoredObject] = [:]
        for n in 1...count {
            let id = try ObjectId(bytes: [0x65, 0, 0, n] + [UInt8](repeating: n, count: 8))
            oracle.ids[n] = id
            var values = [FerryValue](repeating: .null, count: os.properties.count)
            values[os.propertyIndex(named: "_id")!] = .objectId(id)
            values[os.propertyIndex(named: "ownerId")!] = .string("owner-\(n)")
            values[os.propertyIndex(named: "itemName")!] = .string("item \"\(n)\"\n")
            values[os.propertyIndex(named: "complexity")!] = .int(oracle.complexity(n))
            let object = StampedObject(values: values, stamps: values.map { _ in Stamp(timestamp: 1, fileIdent: 1) }, versions: values.map { _ in 1 })
            objects[ObjectKey(table: "Item", key: .objectId(id))] = StoredObject(object: object)
        }
        let file = try await store.newClientFile(userId: "u1")
        let all = objects
        _ = try await store.writeTransaction { tx in try await tx.write(objects: all, clientFile: file.ident, clientVersion: 1) }
        await store.close()
        return oracle
    }

    func json(_ r: TestResponse) throws -> [String: Any] { try #require(try JSONSerialization.jsonObject(with: Data(buffer: r.body)) as? [String: Any]) }
    let withKey: HTTPFields = [DataAPIKeys.header: DataAPITests.key]

    @Test func findPagesThroughWhatTheFilterMatchesAndFindOneReadsByKey() async throws {
        let app = try Self.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-data-api-\(UInt64.random(in: 0...UInt64.max))"
        let oracle = try await Self.seed(data, app: app, count: 40)
        let expected = Set((1...40).filter { oracle.complexity($0) <= 3 }.map { oracle.ids[$0]!.description })
        try await FerryServer.make(Self.configuration(app: app, data: data)).test(.router) { client in
            var seen: [String] = []
            var after: String? = nil
            var pages = 0
            repeat {
                let cursor = after.map { #","after":"\#($0)""# } ?? ""
                let body = #"{"class":"Item","filter":"complexity <= $0","arguments":[{"$numberLong":"3"}],"limit":4\#(cursor)}"#
                let page = try await client.execute(uri: "\(Self.base)/find", method: .post, headers: withKey, body: ByteBuffer(string: body)) { r in
                    #expect(r.status == .ok)
                    return try json(r)
                }
                let docs = try #require(page["documents"] as? [[String: Any]])
                #expect(docs.count <= 4)
                for d in docs {
                    let id = try #require((d["_id"] as? [String: Any])?["$oid"] as? String)
                    let n = try #require(oracle.ids.first { $0.value.description == id }?.key)
                    #expect(d["ownerId"] as? String == "owner-\(n)")
                    #expect(d["itemName"] as? String == "item \"\(n)\"\n")
                    #expect((d["complexity"] as? NSNumber)?.int64Value == oracle.complexity(n))
                    seen.append(id)
                }
                after = page["next"] as? String
                pages += 1
            } while after != nil && pages < 100
            #expect(Set(seen) == expected)
            #expect(seen.count == expected.count)   // no object twice
            #expect(seen == seen.sorted())          // primary-key order (the ids sort as their bytes)
            #expect(pages >= expected.count / 4)

            // count: the same filter's matches, in one call (the class is far below maxCounted).
            let counted = try await client.execute(uri: "\(Self.base)/count", method: .post, headers: withKey,
                                                   body: ByteBuffer(string: #"{"class":"Item","filter":"complexity <= $0","arguments":[3]}"#)) { try json($0) }
            #expect((counted["count"] as? NSNumber)?.intValue == expected.count)
            #expect(counted["next"] == nil)
            // Counted from a cursor: only what follows it.
            let firstPage = try await client.execute(uri: "\(Self.base)/find", method: .post, headers: withKey,
                                                     body: ByteBuffer(string: #"{"class":"Item","limit":10}"#)) { try json($0) }
            let cursor = try #require(firstPage["next"] as? String)
            let rest = try await client.execute(uri: "\(Self.base)/count", method: .post, headers: withKey,
                                                body: ByteBuffer(string: #"{"class":"Item","after":"\#(cursor)"}"#)) { try json($0) }
            #expect((rest["count"] as? NSNumber)?.intValue == 30)

            let id = oracle.ids[5]!.description
            let one = try await client.execute(uri: "\(Self.base)/findOne", method: .post, headers: withKey,
                                               body: ByteBuffer(string: #"{"class":"Item","primaryKey":{"$oid":"\#(id)"}}"#)) { try json($0) }
            #expect((one["document"] as? [String: Any])?["ownerId"] as? String == "owner-5")
            let none = try await client.execute(uri: "\(Self.base)/findOne", method: .post, headers: withKey,
                                                body: ByteBuffer(string: #"{"class":"Item","primaryKey":{"$oid":"0123456789abcdef01234567"}}"#)) { try json($0) }
            #expect(none["document"] is NSNull)
        }
    }

    /// SORT and LIMIT in a filter: one page in the filter's order, ties in primary-key order,
    /// bounded by LIMIT and by "limit"; no cursor with them, none in count.
    @Test func aFindWithSortAnswersOnePageInTheFiltersOrder() async throws {
        let app = try Self.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-data-api-\(UInt64.random(in: 0...UInt64.max))"
        let oracle = try await Self.seed(data, app: app, count: 40)
        // The oracle: complexity descending, then primary key (the ids sort as n does).
        let expected = (1...40).filter { oracle.complexity($0) >= 2 }
            .sorted { oracle.complexity($0) != oracle.complexity($1) ? oracle.complexity($0) > oracle.complexity($1) : $0 < $1 }
            .map { oracle.ids[$0]!.description }
        try await FerryServer.make(Self.configuration(app: app, data: data)).test(.router) { client in
            func find(_ body: String) async throws -> (HTTPResponse.Status, [String]) {
                try await client.execute(uri: "\(Self.base)/find", method: .post, headers: withKey, body: ByteBuffer(string: body)) { r in
                    let docs = ((try? json(r))?["documents"] as? [[String: Any]]) ?? []
                    return (r.status, docs.compactMap { ($0["_id"] as? [String: Any])?["$oid"] as? String })
                }
            }
            let all = try await find(#"{"class":"Item","filter":"complexity >= 2 SORT(complexity DESC)","limit":1000}"#)
            #expect(all.0 == .ok)
            #expect(all.1 == expected)
            #expect(try await find(#"{"class":"Item","filter":"complexity >= 2 SORT(complexity DESC) LIMIT(5)"}"#).1 == Array(expected.prefix(5)))
            #expect(try await find(#"{"class":"Item","filter":"complexity >= 2 SORT(complexity DESC)","limit":3}"#).1 == Array(expected.prefix(3)))
            #expect(try await find(#"{"class":"Item","filter":"TRUEPREDICATE LIMIT(2)"}"#).1 == [oracle.ids[1]!.description, oracle.ids[2]!.description])
            #expect(try await find(#"{"class":"Item","filter":"TRUEPREDICATE SORT(complexity ASC)","after":"AAAA"}"#).0 == .badRequest)
            try await client.execute(uri: "\(Self.base)/count", method: .post, headers: withKey,
                                     body: ByteBuffer(string: #"{"class":"Item","filter":"TRUEPREDICATE SORT(complexity ASC)"}"#)) { #expect($0.status == .badRequest) }
        }
    }

    @Test func refusesWhatItShouldWithAReason() async throws {
        let app = try Self.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-data-api-\(UInt64.random(in: 0...UInt64.max))"
        _ = try await Self.seed(data, app: app, count: 3)
        try await FerryServer.make(Self.configuration(app: app, data: data)).test(.router) { client in
            let find = ByteBuffer(string: #"{"class":"Item"}"#)
            func status(_ uri: String, _ headers: HTTPFields, _ body: String) async throws -> (HTTPResponse.Status, String) {
                try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body)) { r in
                    (r.status, (try? json(r))?["error_code"] as? String ?? "")
                }
            }
            try await client.execute(uri: "\(Self.base)/find", method: .post, body: find) { #expect($0.status == .unauthorized) }
            #expect(try await status("\(Self.base)/find", [DataAPIKeys.header: Self.key + "x"], #"{"class":"Item"}"#).0 == .unauthorized)
            #expect(try await status("\(Self.base)/find", [.authorization: "Bearer \(Self.key)"], #"{"class":"Item"}"#).0 == .unauthorized)
            #expect(try await status("/api/data/v1/app/another-app/action/find", withKey, #"{"class":"Item"}"#).0 == .notFound)
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Nope"}"#) == (.notFound, "ClassNotFound"))
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Item","filter":"complexity <="}"#) == (.badRequest, "InvalidParameter"))
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Item","limit":0}"#).0 == .badRequest)
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Item","limit":1001}"#).0 == .badRequest)
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Item","after":"!!"}"#).0 == .badRequest)
            #expect(try await status("\(Self.base)/find", withKey, #"{"class":"Item","arguments":[{"$oid":"xyz"}],"filter":"_id == $0"}"#).0 == .badRequest)
            #expect(try await status("\(Self.base)/find", withKey, "not json").0 == .badRequest)
            #expect(try await status("\(Self.base)/findOne", withKey, #"{"class":"Item","primaryKey":42}"#).0 == .badRequest)
        }
        // Off in the directory: every call is 404, the right key too.
        let off = try Self.appDirectory(disabled: true)
        try await FerryServer.make(Self.configuration(app: off, data: data)).test(.router) { client in
            try await client.execute(uri: "\(Self.base)/find", method: .post, headers: withKey, body: ByteBuffer(string: #"{"class":"Item"}"#)) {
                #expect($0.status == .notFound)
            }
        }
    }

    @Test func aDeclaredKeyWithoutAStrongSecretStopsTheStart() async throws {
        let app = try Self.appDirectory()
        let data = NSTemporaryDirectory() + "ferry-data-api-\(UInt64.random(in: 0...UInt64.max))"
        for secrets in [[:], ["FERRY_DATA_API_KEY_BACKEND": "short"]] {
            await #expect {
                _ = try await FerryServer.make(Self.configuration(app: app, data: data, secrets: secrets))
            } throws: { ($0 as? ServerStartError)?.description.contains("FERRY_DATA_API_KEY_BACKEND") == true }
        }
    }
}

/// Extended JSON as the Data API writes and reads it.
@Suite("Server: Data API values")
struct DataAPIValuesTests {
    static func text(_ v: FerryValue) -> String {
        var out: [UInt8] = []
        DataAPIValues.append(v, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test func everyKindOfValueInExtendedJSON() throws {
        #expect(Self.text(.objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b"))) == #"{"$oid":"65a1b2c3d4e5f60718293a4b"}"#)
        #expect(Self.text(.uuid(try FerryUUID(string: "3b241101-e2bb-4255-8caf-4136c566a962"))) == #"{"$uuid":"3b241101-e2bb-4255-8caf-4136c566a962"}"#)
        #expect(Self.text(.binary([0, 255])) == #"{"$binary":{"base64":"AP8=","subType":"00"}}"#)
        #expect(Self.text(.timestamp(try Timestamp(seconds: 0, nanoseconds: 5_000_000))) == #"{"$date":"1970-01-01T00:00:00.005Z"}"#)
        #expect(Self.text(.timestamp(try Timestamp(seconds: 1, nanoseconds: 7))) == #"{"$date":"1970-01-01T00:00:01.000000007Z"}"#)
        #expect(Self.text(.timestamp(try Timestamp(seconds: -1, nanoseconds: 0))) == #"{"$date":"1969-12-31T23:59:59.000Z"}"#)
        #expect(Self.text(.timestamp(try Timestamp(seconds: -62_198_755_200, nanoseconds: 0))) == #"{"$date":"-000001-01-01T00:00:00.000Z"}"#)
        #expect(Self.text(.timestamp(try Timestamp(seconds: 253_402_300_800, nanoseconds: 1))) == #"{"$date":"+010000-01-01T00:00:00.000000001Z"}"#)
        #expect(Self.text(.double(.nan)) == #"{"$numberDouble":"NaN"}"#)
        #expect(Self.text(.double(2)) == "2.0")
        #expect(Self.text(.int(Int64.min)) == "-9223372036854775808")
        #expect(Self.text(.list([.string("a\""), .null, .bool(true)])) == #"["a\"",null,true]"#)
    }

    /// The oracle for dates: Foundation's ISO 8601 formatter, over random instants of the
    /// years an ISO date shows; and what is written reads back as the same value.
    @Test func datesAgreeWithFoundationAndReadBack() throws {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<300 {
            // Foundation's calendar turns Julian before 1582: the oracle covers 1970-9999.
            let seconds = Int64.random(in: 0..<253_402_300_800)
            let ms = Int32.random(in: 0..<1000)
            let t = try Timestamp(seconds: seconds, nanoseconds: ms * 1_000_000)
            let written = Self.text(.timestamp(t))
            let iso = String(written.dropFirst(#"{"$date":""#.count).dropLast(2))
            #expect(iso == f.string(from: Date(timeIntervalSince1970: TimeInterval(seconds) + TimeInterval(ms) / 1000)), "\(seconds).\(ms)")
            #expect(try DataAPIValues.date(iso) == t)
            let fine = try Timestamp(seconds: seconds, nanoseconds: Int32.random(in: 0..<1_000_000_000))
            #expect(try DataAPIValues.value(.object([("$date", .string(String(Self.text(.timestamp(fine)).dropFirst(10).dropLast(2))))])) == .timestamp(fine))
        }
    }

    /// Every instant Ferry can hold has an exact text that reads back as it (expanded years
    /// outside 0000-9999; the fuzz target found the loss of nanoseconds there).
    @Test func everyTimestampReadsBackExactly() throws {
        var samples: [Int64] = [Int64.min, Int64.max, -1, 0, -62_167_219_200, -62_167_219_201, 253_402_300_799, 253_402_300_800]
        samples += (0..<500).map { _ in Int64.random(in: Int64.min...Int64.max) }
        for seconds in samples {
            let t = try Timestamp(seconds: seconds, nanoseconds: Int32.random(in: 0..<1_000_000_000))
            let text = Self.text(.timestamp(t))
            #expect(try DataAPIValues.date(String(text.dropFirst(10).dropLast(2))) == t, "\(text)")
        }
        for bad in ["2026-02-30T00:00:00Z", "+12345-01-01T00:00:00Z", "+1234567890123-01-01T00:00:00Z", "2026-11-29T10:00:00.1234567890Z", "2026-11-29 10:00:00Z"] {
            #expect(throws: DataAPIValues.Invalid.self) { _ = try DataAPIValues.date(bad) }
        }
    }

    @Test func requestValuesInEveryForm() throws {
        #expect(try DataAPIValues.value(.object([("$oid", .string("65a1b2c3d4e5f60718293a4b"))])) == .objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b")))
        #expect(try DataAPIValues.value(.object([("$numberLong", .string("-5"))])) == .int(-5))
        #expect(try DataAPIValues.value(.object([("$binary", .object([("base64", .string("AP8=")), ("subType", .string("00"))]))])) == .binary([0, 255]))
        #expect(try DataAPIValues.value(.object([("$date", .object([("$numberLong", .string("-1500"))]))]))
                == .timestamp(try Timestamp(seconds: -2, nanoseconds: 500_000_000)))
        for bad: JSON in [.object([("$oid", .string("zz"))]), .object([("a", .int(1)), ("b", .int(2))]), .object([("$date", .string("yesterday"))]),
                                .object([("$numberLong", .string("1e3"))]), .object([("$what", .null)])] {
            #expect(throws: DataAPIValues.Invalid.self) { _ = try DataAPIValues.value(bad) }
        }
        #expect(throws: DataAPIValues.Invalid.self) { _ = try DataAPIValues.primaryKey(.int(4), of: .objectId) }
    }
}
