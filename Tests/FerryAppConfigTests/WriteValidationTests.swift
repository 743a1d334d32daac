import Testing
import FerryCore
@testable import FerryAppConfig

/// The seeds' scenario (SPEC F-COMPWRITE, F-CWINFO) on the seeds' app: `owner-read-write` and
/// the subscription `complexity <= 4`.
@Suite("Write validation against the seeds' Item app")
struct WriteValidationTests {
    let app = try! AppDirectory.load(AppDirectoryTests.example)
    var item: ObjectSchema { try! app.schema.objectSchema(named: "Item")! }

    func validator() throws -> WriteValidator {
        WriteValidator(objectSchema: item, rules: app.rules(for: "Item"),
                       subscriptions: [try CompiledQuery("complexity <= 4", on: item)])
    }

    func row(_ id: String, owner: String, complexity: Int64) throws -> [FerryValue] {
        var values = item.properties.map(\.defaultValue)
        values[item.primaryKeyIndex] = .objectId(try ObjectId(hex: id))
        values[try #require(item.propertyIndex(named: "ownerId"))] = .string(owner)
        values[try #require(item.propertyIndex(named: "itemName"))] = .string("x")
        values[try #require(item.propertyIndex(named: "complexity"))] = .int(complexity)
        return values
    }

    @Test func aWriteInViewAndPermittedStands() throws {
        let alice = UserContext(id: "alice")
        #expect(try validator().check(user: alice, before: nil, after: row("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 2)) == nil)
    }

    @Test func complexitySevenIsOutsideTheQueryView() throws {
        let cw = try validator().check(user: UserContext(id: "alice"), before: nil,
                                       after: row("65a1b2c3d4e5f60718293a4b", owner: "alice", complexity: 7))
        #expect(cw?.objectType == "Item")
        #expect(cw?.reason == "write to \"65a1b2c3d4e5f60718293a4b\" in table \"Item\" not allowed; object is outside of the current query view")
    }

    @Test func anotherOwnerIsDeniedByTheWriteFilter() throws {
        let cw = try validator().check(user: UserContext(id: "alice"), before: nil,
                                       after: row("65a1b2c3d4e5f60718293a4c", owner: "bob", complexity: 2))
        #expect(cw?.reason == "write to \"65a1b2c3d4e5f60718293a4c\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
    }

    @Test func updatesMustBeAllowedBeforeAndAfter() throws {
        let alice = UserContext(id: "alice")
        let mine = try row("65a1b2c3d4e5f60718293a4d", owner: "alice", complexity: 1)
        let givenAway = try row("65a1b2c3d4e5f60718293a4d", owner: "bob", complexity: 1)
        let leaving = try row("65a1b2c3d4e5f60718293a4d", owner: "alice", complexity: 5)
        #expect(try validator().check(user: alice, before: mine, after: givenAway)?.reason.contains("denied by write filter") == true)
        #expect(try validator().check(user: alice, before: mine, after: leaving)?.reason.contains("outside of the current query view") == true)
        #expect(try validator().check(user: alice, before: mine, after: nil) == nil)  // deleting her own item
        #expect(try validator().check(user: UserContext(id: "bob"), before: mine, after: nil) != nil)
    }

    @Test func theClientLogLineIsTheSeedsOne() {
        #expect(SyncErrorText.compensatingWriteLogLine() ==
            "Sync: Connection[1]: Session[1]: Received: ERROR \"Client attempted a write that is outside of permissions or query filters; it has been reverted\" (error_code=231, try_again=true, error_action=Warning)")
    }
}
