import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// The catch-up of many sessions from one read (`CatchUpGroup`, with `ReadPins` choosing who
/// looks at an object): each member is sent exactly what its own catch-up would send it.
@Suite("Server: catching up many sessions from one read")
struct CatchUpGroupTests {
    let app = try! AppDirectory.load(AuthAPITests.example)
    var item: ObjectSchema { try! app.schema.objectSchema(named: "Item")! }
    var ownerRole: Role { try! #require(app.rules(for: "Item")?.role(for: UserContext(id: "x"))) }

    func values(_ n: Int, owner: String, complexity: Int64) -> [FerryValue] {
        var v = [FerryValue](repeating: .null, count: item.properties.count)
        v[item.propertyIndex(named: "_id")!] = .objectId(try! ObjectId(hex: String(format: "65a1b2c3d4e5f607%08x", n)))
        v[item.propertyIndex(named: "ownerId")!] = .string(owner)
        v[item.propertyIndex(named: "itemName")!] = .string("item \(n)")
        v[item.propertyIndex(named: "complexity")!] = .int(complexity)
        return v
    }

    func stamped(_ values: [FerryValue], version: UInt64) -> StampedObject {
        StampedObject(values: values, stamps: Array(repeating: Stamp(timestamp: 1, fileIdent: 1), count: values.count),
                      versions: Array(repeating: version, count: values.count))
    }

    @Test func theOwnerRolePinsTheOwnerAndOtherRolesAreOpenOrClosed() throws {
        let alice = UserContext(id: "alice")
        let owner = item.propertyIndex(named: "ownerId")!
        #expect(ReadPins.reach(ownerRole, user: alice, of: item) == .pinned([ReadPins.Pin(property: owner, values: [.string("alice")]),
                                                                              ReadPins.Pin(property: owner, values: [.string("alice")])]))
        #expect(ReadPins.reach(Role(name: "everything", read: true), user: alice, of: item) == .open)
        #expect(ReadPins.reach(Role(name: "nothing"), user: alice, of: item) == .none)
        #expect(ReadPins.reach(nil, user: alice, of: item) == .none)
        // Reading one's own or a team's: both pins; a number pins nothing.
        let team = Role(name: "team", readFilter: .or([.field("ownerId", .equal(.user(path: "id"))), .field("ownerId", .in([.value(.string("team"))]))]), read: true)
        #expect(ReadPins.reach(team, user: alice, of: item) == .pinned([ReadPins.Pin(property: owner, values: [.string("alice")]),
                                                                        ReadPins.Pin(property: owner, values: [.string("team")])]))
        let numeric = Role(name: "easy", readFilter: .field("complexity", .equal(.value(.int(1)))), read: true)
        #expect(ReadPins.reach(numeric, user: alice, of: item) == .open)
        // A %%user value the user does not have matches nothing.
        let missing = Role(name: "org", readFilter: .field("ownerId", .equal(.user(path: "data.org"))), read: true)
        #expect(ReadPins.reach(missing, user: alice, of: item) == .pinned([ReadPins.Pin(property: owner, values: [])]))
    }

    /// The oracle: random members (users, queries, roles, versions) and random changes
    /// (objects, tombstones, objects moved between owners); each member's downloads from the
    /// group equal those of its own catch-up, byte for byte.
    @Test func eachMemberGetsWhatItsOwnCatchUpWouldSend() throws {
        var rng = SystemRandomNumberGenerator()
        let owners = ["a", "b", "c", "team"]
        let shapes = ["ownerId == \"%\"", "ownerId == \"%\" AND complexity <= 4", "complexity >= 5", "TRUEPREDICATE", "ownerId != \"%\""]
        let roles: [Role?] = [ownerRole, Role(name: "everything", read: true), nil,
                              Role(name: "team", readFilter: .or([.field("ownerId", .equal(.user(path: "id"))), .field("ownerId", .equal(.value(.string("team"))))]), read: true),
                              Role(name: "easy", readFilter: .field("complexity", .lessOrEqual(.value(.int(4)))), read: true)]
        for round in 0..<20 {
            var members: [CatchUpGroup.Member] = []
            for n in 0..<Int.random(in: 1...90, using: &rng) {
                let user = owners.randomElement(using: &rng)!
                let query = try CompiledQuery(shapes.randomElement(using: &rng)!.replacingOccurrences(of: "%", with: user), on: item)
                let view = SessionView(user: UserContext(id: user), queries: ["Item": [query]], roles: ["Item": roles.randomElement(using: &rng)!])
                members.append(CatchUpGroup.Member(session: UInt64(n + 1), view: view, delivered: UInt64.random(in: 0...50, using: &rng)))
            }
            var changes: [(ObjectSchema, ChangedObject)] = []
            for n in 0..<Int.random(in: 0...120, using: &rng) {
                let version = UInt64.random(in: 1...60, using: &rng)
                let v = values(n, owner: owners.randomElement(using: &rng)!, complexity: Int64.random(in: 0...9, using: &rng))
                let erased = Int.random(in: 0..<5, using: &rng) == 0
                changes.append((item, ChangedObject(key: v[item.primaryKeyIndex], object: erased ? nil : stamped(v, version: version),
                                                    erasedState: erased ? stamped(v, version: version) : nil, version: version)))
            }
            let group = CatchUpGroup(members: members, schema: try app.schema, app: app)
            let downloads = group.encode(changes)
            #expect(downloads.count == members.count)
            for (m, got) in zip(members, downloads) {
                var own = DownloadBatch(session: m.session)
                for (os, c) in changes where c.version > m.delivered {
                    if let i = m.view.catchUp(c, of: os, app: app) { own.add(i) }
                }
                let expected = own.isEmpty ? [] : own.sealed()
                #expect(got == expected, "round \(round), session \(m.session) (user \(m.view.user.id), delivered \(m.delivered))")
            }
        }
    }
}
