import FerryAppConfig
import FerryCore
import FerryAuth
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// The fan-out index (`FanOutIndex`) and the chain of `SessionRegistry`: a commit visits only
/// the sessions its objects may concern, and every session whose view holds an object before
/// or after a change is among them.
@Suite("Server: fan-out index and chain")
struct FanOutIndexTests {
    let app = try! AppDirectory.load(AuthAPITests.example)
    var item: ObjectSchema { try! app.schema.objectSchema(named: "Item")! }

    func view(_ user: String, _ queries: String...) throws -> SessionView {
        try SessionView.make(queries.enumerated().map { Subscription(name: "s\($0.offset)", objectType: "Item", query: $0.element) },
                             user: UserContext(id: user), app: app, schema: app.schema).get()
    }

    func values(owner: String, complexity: Int64) throws -> [FerryValue] {
        var v = [FerryValue](repeating: .null, count: item.properties.count)
        v[item.propertyIndex(named: "_id")!] = .objectId(try ObjectId(hex: "65a1b2c3d4e5f60718293a4b"))
        v[item.propertyIndex(named: "ownerId")!] = .string(owner)
        v[item.propertyIndex(named: "itemName")!] = .string("x")
        v[item.propertyIndex(named: "complexity")!] = .int(complexity)
        return v
    }

    func key(_ n: UInt64) -> SessionKey { SessionKey(connection: n, session: 1) }

    @Test func pinnedQueriesAreFoundByValueAndOthersByClass() throws {
        var index = FanOutIndex()
        index.set(key(1), view: try view("alice", "ownerId == \"alice\""))
        index.set(key(2), view: try view("bob", "ownerId == \"bob\" AND complexity <= 4"))
        index.set(key(3), view: try view("carol", "ownerId IN {\"carol\", \"alice\"}"))
        // A numeric condition pins nothing: a candidate for every change of the class.
        index.set(key(4), view: try view("dave", "complexity == 3"))
        // One query of the class pins nothing: the class is open for that session.
        index.set(key(5), view: try view("erin", "ownerId == \"erin\"", "complexity > 8"))
        let alice = try values(owner: "alice", complexity: 2), bob = try values(owner: "bob", complexity: 9)
        #expect(index.candidates(table: "Item", before: nil, after: alice) == [key(1), key(3), key(4), key(5)])
        #expect(index.candidates(table: "Item", before: nil, after: bob) == [key(2), key(4), key(5)])
        // An object moved from bob to alice concerns both sides (bob's view loses it).
        #expect(index.candidates(table: "Item", before: bob, after: alice) == [key(1), key(2), key(3), key(4), key(5)])
        #expect(index.candidates(table: "Item", before: alice, after: nil) == [key(1), key(3), key(4), key(5)])
        #expect(index.candidates(table: "Note", before: nil, after: alice).isEmpty)
        // A new set replaces the old registration; a removed session is gone.
        index.set(key(1), view: try view("alice", "ownerId == \"zed\""))
        index.remove(key(4))
        #expect(index.candidates(table: "Item", before: nil, after: alice) == [key(3), key(5)])
    }

    /// The oracle: for random views and changes, every session whose view holds the object
    /// before or after is a candidate.
    @Test func everySessionWhoseViewHoldsTheObjectIsACandidate() throws {
        var rng = SystemRandomNumberGenerator()
        let owners = ["a", "b", "c", "d"]
        let shapes = ["ownerId == \"%\"", "ownerId == \"%\" AND complexity <= 4", "complexity >= 5", "ownerId IN {\"%\", \"b\"}", "TRUEPREDICATE",
                      "ownerId != \"%\""]
        var index = FanOutIndex()
        var views: [SessionKey: SessionView] = [:]
        for n in 0..<40 {
            let owner = owners.randomElement(using: &rng)!
            let shape = shapes.randomElement(using: &rng)!.replacingOccurrences(of: "%", with: owner)
            let v = try view(owner, shape)
            views[key(UInt64(n))] = v
            index.set(key(UInt64(n)), view: v)
        }
        for _ in 0..<500 {
            let before = Bool.random(using: &rng) ? nil : try values(owner: owners.randomElement(using: &rng)!, complexity: Int64.random(in: 0...9, using: &rng))
            let after = Bool.random(using: &rng) ? nil : try values(owner: owners.randomElement(using: &rng)!, complexity: Int64.random(in: 0...9, using: &rng))
            let found = index.candidates(table: "Item", before: before, after: after)
            for (k, v) in views where (before.map { v.contains($0, of: item) } ?? false) || (after.map { v.contains($0, of: item) } ?? false) {
                #expect(found.contains(k), "session \(k) holds the object but is not a candidate")
            }
        }
    }

    @Test func followersOfTheChainAreAtItsHeadUntilTheyLeaveIt() throws {
        let registry = SessionRegistry()
        registry.breakChain(at: 10)
        let outbox = ConnectionOutbox(id: 1, user: UserContext(id: "alice"))
        var s = ServerSession(outbox: outbox, id: 1, clientFile: 7, view: try view("alice", "ownerId == \"alice\""), delivered: 10)
        s.hasQuery = true
        registry[s.key] = s
        #expect(registry.detachedKeys.isEmpty)
        registry.advanceChain(to: 11)
        #expect(registry[s.key]?.delivered == 11)
        // Busy: it leaves the chain where it is.
        registry[s.key]?.busy = true
        registry.advanceChain(to: 12)
        #expect(registry[s.key]?.delivered == 11)
        #expect(registry.detachedKeys == [s.key])
        // Caught up to the head and idle again: it follows.
        registry[s.key]?.delivered = 12
        registry.release(s.key)
        registry.advanceChain(to: 13)
        #expect(registry[s.key]?.delivered == 13)
        // A commit not fanned out here breaks the chain: the follower stays where it was.
        registry.breakChain(at: 15)
        #expect(registry[s.key]?.delivered == 13)
        #expect(registry.detachedKeys == [s.key])
        // Behind the chain's start it stays out whatever changes; caught up, it joins.
        registry[s.key]?.acknowledged = 3
        #expect(registry.detachedKeys == [s.key])
        registry[s.key]?.delivered = 15
        #expect(registry.detachedKeys.isEmpty)
        // A commit it could not be sent: it owes it, and stays out until it has it.
        registry.skip(s.key, owing: 16)
        registry.advanceChain(to: 16)
        registry[s.key]?.acknowledged = 4
        #expect(registry[s.key]?.delivered == 15)
        #expect(registry.detachedKeys == [s.key])
        registry[s.key]?.delivered = 16
        registry.advanceChain(to: 17)
        #expect(registry[s.key]?.delivered == 17)
        #expect(registry.keys(ofClientFile: 7) == [s.key])
        registry.remove(s.key)
        #expect(registry.keys(ofClientFile: 7).isEmpty)
        #expect(registry.keys(onConnection: 1).isEmpty)
    }
}
