import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// The seeds' scenario end to end: a real ferry-server, devices syncing through the engine.
@Suite("Sync end to end", .serialized)
struct SyncEndToEndTests {
    @Test func twoDevicesOfOneUserSyncBothWays() async throws {
        try await SyncTestServer.withServer { url in
            let email = "ana\(UInt32.random(in: 0...UInt32.max))@example.com"
            let a = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"), register: (email, "password123"))
            let b = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"))
            defer { a.close(); b.close() }
            #expect(a.user.id == b.user.id)
            try await a.subscribe("complexity <= 4")
            try await b.subscribe("complexity <= 4")
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "Write code", complexity: 3)
            try await a.sync()
            try await b.sync()
            #expect(try b.item(id)?[2] == .string("Write code"))
            // And back.
            try b.write { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("Write tests")) }
            try await b.sync()
            try await a.sync()
            #expect(try a.item(id)?[2] == .string("Write tests"))
            #expect(a.errors.all.isEmpty && b.errors.all.isEmpty)
        }
    }

    @Test func anotherUserNeverReceivesTheItems() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await TestDevice(baseURL: url, credentials: .anonymous)
            let other = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { a.close(); other.close() }
            try await a.subscribe("complexity <= 4")
            try a.createItem(ObjectId.generate(), owner: a.user.id, name: "mine", complexity: 1)
            try await a.sync()
            try await other.subscribe("TRUEPREDICATE")
            try await other.subscribe("complexity >= 0", name: "all")
            try await other.sync()
            #expect(try other.allItems().isEmpty)
        }
    }

    @Test func outOfViewAndWrongOwnerWritesAreReverted() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { a.close() }
            try await a.subscribe("complexity <= 4")
            let complex = ObjectId.generate(), foreign = ObjectId.generate()
            try a.createItem(complex, owner: a.user.id, name: "Do the dishes", complexity: 7)
            let first = await a.errors.wait(count: 1)
            try a.createItem(foreign, owner: "This string does not match the user.id", name: "Write code that generates a permission error", complexity: 1)
            let errors = await a.errors.wait(count: 2)
            try #require(errors.count == 2)
            #expect(first[0].code == 231)
            #expect(errors[0].message == "Client attempted a write that is outside of permissions or query filters; it has been reverted")
            #expect(!errors[0].isFatal && errors[0].action == .warning)
            #expect(errors[0].compensatingWrites == [.outsideView(objectType: "Item", primaryKey: .objectId(complex))])
            #expect(errors[0].compensatingWrites.first?.reason == "write to \"\(complex.hexString)\" in table \"Item\" not allowed; object is outside of the current query view")
            #expect(errors[1].compensatingWrites.first?.reason == "write to \"\(foreign.hexString)\" in table \"Item\" was denied by write filter in role \"owner-read-write\"")
            // The handler ran after the revert: both objects are gone locally.
            #expect(try a.item(complex) == nil)
            #expect(try a.item(foreign) == nil)
        }
    }

    /// SPEC F-REQSUB: nothing syncs down without a subscription, and a write made without
    /// any subscription is outside every view: the server reverts it (231).
    @Test func withoutASubscriptionNothingDownloadsAndWritesAreReverted() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "no-subs")))
            let b = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "no-subs")))
            defer { a.close(); b.close() }
            try await a.subscribe("complexity <= 4")
            let kept = ObjectId.generate()
            try a.createItem(kept, owner: a.user.id, name: "synced", complexity: 1)
            try await a.sync()
            try await b.waitDownload()
            #expect(try b.allItems().isEmpty)
            let orphan = ObjectId.generate()
            try b.createItem(orphan, owner: b.user.id, name: "no subscription", complexity: 1)
            let errors = await b.errors.wait(count: 1)
            #expect(errors.first?.compensatingWrites == [.outsideView(objectType: "Item", primaryKey: .objectId(orphan))])
            #expect(try b.item(orphan) == nil)
            try await a.sync()
            #expect(try a.item(orphan) == nil)
            #expect(try a.item(kept) != nil)
        }
    }

    @Test func concurrentOfflineEditsConverge() async throws {
        try await SyncTestServer.withServer { url in
            let email = "bo\(UInt32.random(in: 0...UInt32.max))@example.com"
            let a = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"), register: (email, "password123"))
            let b = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"))
            defer { a.close(); b.close() }
            try await a.subscribe("complexity <= 4")
            try await b.subscribe("complexity <= 4")
            let id = ObjectId.generate(), erased = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "start", complexity: 0)
            try a.createItem(erased, owner: a.user.id, name: "to erase", complexity: 0)
            try await a.sync()
            try await b.sync()
            // Concurrent: a sets then b sets later (b wins); a adds 1, b adds 2 (sum); a erases while b updates (erased).
            try a.write { db in
                try db.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("from a"))
                try db.addInteger(classIndex: 0, key: .objectId(id), property: 3, delta: 1)
                try db.delete(classIndex: 0, key: .objectId(erased))
            }
            try b.write { db in
                try db.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("from b"))
                try db.addInteger(classIndex: 0, key: .objectId(id), property: 3, delta: 2)
                try db.set(classIndex: 0, key: .objectId(erased), property: 2, value: .string("updated"))
            }
            try await a.sync()
            try await b.sync()
            try await a.sync()
            for d in [a, b] {
                #expect(try d.item(id)?[2] == .string("from b"))
                #expect(try d.item(id)?[3] == .int(3))
                #expect(try d.item(erased) == nil)
            }
        }
    }
}
