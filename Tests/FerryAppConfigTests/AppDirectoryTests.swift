import Foundation
import Testing
import FerryCore
@testable import FerryAppConfig

/// The seeds' Item app (examples/item-app) and broken variants of it.
@Suite("App Services app directories")
struct AppDirectoryTests {
    static let example = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("examples/item-app").path

    @Test func readsTheSeedsItemApp() throws {
        let app = try AppDirectory.load(Self.example)
        #expect(app.name == "item-app")
        #expect(app.appId == "item-app-seeds")
        #expect(Set(app.authProviders.map(\.type)) == ["anon-user", "local-userpass", "api-key", "custom-token"])
        #expect(app.authProviders.first { $0.type == "custom-token" }?.secretNames["signingKeys"] == ["jwtSigningKey"])
        #expect(app.sync.queryableFields == ["complexity", "ownerId"])
        #expect(app.sync.clientMaxOfflineDays == 30)
        #expect(app.sync.isQueryable("_id", in: "Item") && app.sync.isQueryable("complexity", in: "Item"))
        #expect(!app.sync.isQueryable("itemName", in: "Item"))
        let item = try #require(try app.schema.objectSchema(named: "Item"))
        #expect(item.primaryKey.type == .objectId)
        #expect(item.property(named: "complexity")?.type == .int)
        #expect(item.property(named: "ownerId")?.isOptional == false)
        let role = try #require(app.rules(for: "Item").roles.first)
        #expect(role.name == "owner-read-write")
        #expect(role.readFilter == .field("ownerId", .equal(.user(path: "id"))))
    }

    @Test func theOwnerReadWriteRole() throws {
        let app = try AppDirectory.load(Self.example)
        let alice = UserContext(id: "alice"), bob = UserContext(id: "bob")
        let role = try #require(app.rules(for: "Item").role(for: alice))
        let alicesItem: (String) -> FerryValue? = { $0 == "ownerId" ? .string("alice") : nil }
        #expect(role.canRead(user: alice, field: alicesItem))
        #expect(role.canWrite(user: alice, field: alicesItem))
        #expect(!role.canRead(user: bob, field: alicesItem))
        #expect(!role.canWrite(user: bob, field: alicesItem))
        #expect(app.rules(for: "Unknown").role(for: alice) == nil)   // no rules: no access
    }

    @Test func filtersFollowMongoDBSemantics() throws {
        let f = try AppDirectory.filter(["$or": [["public": true], ["ownerId": "%%user.id", "score": ["$gte": 3, "$lt": 10]]],
                                         "team": ["$in": ["%%user.custom_data.team", "all"]]] as [String: Any], "test", "test.json")
        let user = UserContext(id: "u1", customData: ["team": .string("red")])
        func doc(_ fields: [String: FerryValue]) -> (String) -> FerryValue? { { fields[$0] } }
        #expect(f.matches(user: user, field: doc(["public": .bool(true), "team": .string("all")])))
        #expect(f.matches(user: user, field: doc(["ownerId": .string("u1"), "score": .int(5), "team": .string("red")])))
        #expect(!f.matches(user: user, field: doc(["ownerId": .string("u1"), "score": .int(10), "team": .string("red")])))
        #expect(!f.matches(user: user, field: doc(["public": .bool(true), "team": .string("blue")])))
        // An expansion the user does not have never grants access.
        #expect(!f.matches(user: UserContext(id: "u1"), field: doc(["ownerId": .string("u1"), "score": .int(5), "team": .string("red")])))
        // Arrays match element-wise; a missing field compares like null.
        let tags = try AppDirectory.filter(["tags": "x", "gone": ["$exists": false]] as [String: Any], "t", "t.json")
        #expect(tags.matches(user: user, field: doc(["tags": .list([.string("a"), .string("x")])])))
    }

    /// Copies the example, breaks one file, and checks the error names it and the problem.
    @Test(arguments: [
        ("sync/config.json", "{ \"type\": \"flexible\", \"queryable_fields_names\": \"complexity\" }", "queryable_fields_names"),
        ("sync/config.json", "{ not json", "not valid JSON"),
        ("root_config.json", "{}", "'name' must be a non-empty string"),
        ("data_sources/mongodb-atlas/todo/Item/schema.json",
         "{ \"title\": \"Item\", \"properties\": { \"_id\": { \"bsonType\": \"objectId\" }, \"x\": { \"bsonType\": \"javascript\" } } }", "bsonType 'javascript'"),
        ("data_sources/mongodb-atlas/todo/Item/rules.json",
         "{ \"roles\": [ { \"name\": \"r\", \"document_filters\": { \"read\": { \"a\": { \"$regex\": \"x\" } } }, \"read\": true } ] }", "operator $regex"),
        ("auth/providers.json", "{ \"x\": { \"type\": \"oauth2-google\" } }", "unknown type 'oauth2-google'"),
    ])
    func badConfigurationNamesTheFileAndTheProblem(file: String, contents: String, fragment: String) throws {
        let copy = NSTemporaryDirectory() + "ferry-app-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.copyItem(atPath: Self.example, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try contents.write(toFile: copy + "/" + file, atomically: true, encoding: .utf8)
        do {
            _ = try AppDirectory.load(copy)
            Issue.record("accepted a broken \(file)")
        } catch let e as AppConfigurationError {
            #expect(e.file == file || e.file.hasPrefix(file))
            #expect(e.description.contains(fragment), "message: \(e.description)")
        }
    }

    @Test func aMissingDirectoryIsAClearError() {
        do { _ = try AppDirectory.load("/nonexistent/app"); Issue.record("accepted") } catch let e as AppConfigurationError {
            #expect(e.file == "root_config.json")
            #expect(e.problem.contains("missing"))
        } catch { Issue.record("\(error)") }
    }
}
