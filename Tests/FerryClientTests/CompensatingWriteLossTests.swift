import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// SPEC F-NOLOSS: a compensating write reports what its revert took from the device (the
/// device's values, the local writes it undid or discarded), and the host puts it back with
/// one call. Real server, the seeds' Item app; the oracle is what the test wrote. The writes
/// of a case are made while the session is paused, so they reach the server in one upload.
@Suite("Compensating writes: nothing lost", .serialized)
struct CompensatingWriteLossTests {
    /// Runs `body` with a device subscribed to `complexity <= 4`.
    private func withDevice(appDirectory: String = SyncTestServer.appDirectory, schema: Schema = itemSchema, appId: String = "item-app-seeds",
                            subscribe: (String, String) = ("Item", "complexity <= 4"),
                            _ body: (TestDevice) async throws -> Void) async throws {
        try await SyncTestServer.withServer(appDirectory: appDirectory) { url in
            let d = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "noloss-\(UInt64.random(in: 0...UInt64.max))")),
                                   schema: schema, appId: appId)
            defer { d.close() }
            let v = try d.session.updateSubscriptions { $0.add(name: "view", objectType: subscribe.0, query: subscribe.1) }
            let done = Arrival<FerryError?>()
            d.session.waitForSubscriptions(version: v) { done.deliver($0) }
            guard let r = await done.wait() else { throw FerryError(.timeout, "subscription wait timed out") }
            if let e = r { throw e }
            try await body(d)
        }
    }

    /// Makes `writes` (one write transaction each) while paused, then resumes and waits for
    /// the 231. Returns it and the local versions of the writes.
    private func offline(_ d: TestDevice, errorsBefore: Int = 0, _ writes: [(Database) throws -> Void]) async throws -> (SyncError, [UInt64]) {
        d.session.suspend()
        var versions: [UInt64] = []
        for w in writes {
            try d.write(w)
            versions.append(try d.db.latestLocalVersion())
        }
        d.session.resume()
        let errors = await d.errors.wait(count: errorsBefore + 1)
        try #require(errors.count == errorsBefore + 1, "no compensating write arrived")
        return (errors[errorsBefore], versions)
    }

    private func key(_ id: ObjectId) -> FerryValue { .objectId(id) }

    @Test func aRevertedCreateKeepsItsValuesAndTheLaterWrites() async throws {
        try await withDevice { d in
            let id = ObjectId.generate()
            let (error, v) = try await offline(d, [
                { try $0.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string("someone else")), (2, .string("draft")), (3, .int(1))]) },
                { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("Write the report")) },
                { try $0.addInteger(classIndex: 0, key: .objectId(id), property: 3, delta: 2) },
            ])
            #expect(error.code == 231)
            #expect(error.compensatingWrites == [.deniedByWriteFilter(objectType: "Item", primaryKey: key(id), role: "owner-read-write")])
            #expect(try d.item(id) == nil)
            let expected = RevertedObject(objectType: "Item", primaryKey: key(id), revert: .removed, values: [
                RevertedValue(property: 1, name: "ownerId", value: .string("someone else")),
                RevertedValue(property: 2, name: "itemName", value: .string("Write the report")),
                RevertedValue(property: 3, name: "complexity", value: .int(3)),
            ], writes: [
                LocalWrite(version: v[0], instruction: .create(table: "Item", key: key(id), fields: [
                    FieldValue(name: "ownerId", value: .string("someone else")), FieldValue(name: "itemName", value: .string("draft")),
                    FieldValue(name: "complexity", value: .int(1))])),
                LocalWrite(version: v[1], instruction: .set(table: "Item", key: key(id), field: "itemName", value: .string("Write the report"))),
                LocalWrite(version: v[2], instruction: .addInteger(table: "Item", key: key(id), field: "complexity", delta: 2)),
            ])
            #expect(error.reverted(for: error.compensatingWrites[0]) == expected)
            // Put back with the owner fixed: it syncs and stays.
            let reverted = try #require(error.reverted(for: error.compensatingWrites[0]))
            try d.db.reapply(reverted, overriding: [(1, .string(d.user.id))])
            try await d.sync()
            try await d.waitDownload()
            #expect(try d.item(id) == [key(id), .string(d.user.id), .string("Write the report"), .int(3)])
            #expect(d.errors.all.count == 1)
        }
    }

    @Test func aRevertedUpdateFollowedByLegalAndIllegalUpdates() async throws {
        try await withDevice { d in
            let id = ObjectId.generate()
            try d.createItem(id, owner: d.user.id, name: "start", complexity: 1)
            try await d.sync()
            let (error, v) = try await offline(d, [
                { try $0.set(classIndex: 0, key: .objectId(id), property: 1, value: .string("someone else")) }, // denied
                { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("legal")) },        // stands
                { try $0.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(7)) },                 // out of view
            ])
            #expect(error.compensatingWrites == [.deniedByWriteFilter(objectType: "Item", primaryKey: key(id), role: "owner-read-write"),
                                                 .outsideView(objectType: "Item", primaryKey: key(id))])
            #expect(try d.item(id) == [key(id), .string(d.user.id), .string("legal"), .int(1)])
            let expected = RevertedObject(objectType: "Item", primaryKey: key(id), revert: .changed, values: [
                RevertedValue(property: 1, name: "ownerId", value: .string("someone else")),
                RevertedValue(property: 3, name: "complexity", value: .int(7)),
            ], writes: [
                LocalWrite(version: v[0], instruction: .set(table: "Item", key: key(id), field: "ownerId", value: .string("someone else"))),
                LocalWrite(version: v[2], instruction: .set(table: "Item", key: key(id), field: "complexity", value: .int(7))),
            ])
            // Both entries name the object: one record.
            #expect(error.revertedObjects == [expected])
            #expect(error.reverted(for: error.compensatingWrites[1]) == expected)
            // Put back, fixed: the owner stays the user's, complexity 4 is in view.
            try d.db.reapply(expected, overriding: [(1, .string(d.user.id)), (3, .int(4))])
            try await d.sync()
            try await d.waitDownload()
            #expect(try d.item(id) == [key(id), .string(d.user.id), .string("legal"), .int(4)])
            #expect(d.errors.all.count == 1)
        }
    }

    @Test func aRevertedUpdateWhoseLaterWritesSurviveLosesNothing() async throws {
        try await withDevice { d in
            let id = ObjectId.generate()
            try d.createItem(id, owner: d.user.id, name: "start", complexity: 1)
            try await d.sync()
            // Out of view, then back in view in a later transaction of the same upload: the
            // server reverts the first and takes the second; the device ends as it wrote.
            let (error, _) = try await offline(d, [
                { try $0.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(9)) },
                { try $0.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(2)) },
            ])
            #expect(error.compensatingWrites == [.outsideView(objectType: "Item", primaryKey: key(id))])
            #expect(error.revertedObjects.isEmpty)
            #expect(try d.item(id)?[3] == .int(2))
        }
    }

    /// The seeds' Item app with deletes refused (`"delete": false`): a delete is reverted.
    private static func noDeleteApp() throws -> String {
        let dir = SyncTestServer.temporaryDirectory("no-delete-app")
        try FileManager.default.removeItem(atPath: dir)
        try FileManager.default.copyItem(atPath: SyncTestServer.appDirectory, toPath: dir)
        let rules = dir + "/data_sources/mongodb-atlas/todo/Item/rules.json"
        let text = try String(contentsOfFile: rules, encoding: .utf8).replacingOccurrences(of: "\"delete\": true", with: "\"delete\": false")
        try text.write(toFile: rules, atomically: true, encoding: .utf8)
        return dir
    }

    @Test func aRevertedDeleteIsReportedAndDeletedAgainByTheReapply() async throws {
        try await withDevice(appDirectory: try Self.noDeleteApp()) { d in
            let id = ObjectId.generate()
            try d.createItem(id, owner: d.user.id, name: "keep me", complexity: 2)
            try await d.sync()
            let (error, v) = try await offline(d, [{ try $0.delete(classIndex: 0, key: .objectId(id)) }])
            #expect(error.compensatingWrites == [.deniedByWriteFilter(objectType: "Item", primaryKey: key(id), role: "owner-read-write")])
            #expect(try d.item(id) == [key(id), .string(d.user.id), .string("keep me"), .int(2)])
            let expected = RevertedObject(objectType: "Item", primaryKey: key(id), revert: .restored, values: [],
                                          writes: [LocalWrite(version: v[0], instruction: .erase(table: "Item", key: key(id)))])
            #expect(error.revertedObjects == [expected])
            // Deleting again is refused again (the rule did not change), and reported the same way.
            try d.db.reapply(expected)
            #expect(try d.item(id) == nil)
            let again = await d.errors.wait(count: 2)
            try #require(again.count == 2)
            #expect(again[1].revertedObjects.map(\.revert) == [.restored])
            #expect(try d.item(id) != nil)
        }
    }

    static let docSchema = RandomConvergenceTests.docSchema

    @Test func listsAreKeptWholeForARevertedCreateAndAChangedList() async throws {
        try await withDevice(appDirectory: SyncTestServer.convergenceAppDirectory, schema: Self.docSchema, appId: "convergence",
                             subscribe: ("Doc", "rank <= 10")) { d in
            let me = d.user.id
            let tags = 5
            // A create refused for its owner, its list filled in later transactions.
            let (error, v) = try await offline(d, [
                { try $0.create(classIndex: 0, values: [(0, .string("doc-a")), (1, .string("someone else")), (2, .string("A")), (4, .int(1))]) },
                { try $0.modifyList(classIndex: 0, key: .string("doc-a"), property: tags, .insert(0, .string("x"))) },
                { try $0.modifyList(classIndex: 0, key: .string("doc-a"), property: tags, .insert(1, .string("y"))) },
            ])
            let created = try #require(error.revertedObjects.first)
            #expect(created.revert == .removed)
            #expect(created.value(of: "tags") == .list([.string("x"), .string("y")]))
            #expect(created.value(of: "ownerId") == .string("someone else"))
            #expect(created.writes.map(\.version) == v)
            #expect(try d.db.object(classIndex: 0, key: .string("doc-a")) == nil)
            try d.db.reapply(created, overriding: [(1, .string(me))])
            try await d.sync()
            try await d.waitDownload()
            #expect(try d.db.object(classIndex: 0, key: .string("doc-a"))?[tags] == .list([.string("x"), .string("y")]))

            // A list change made in the same transaction as a write out of view: both reverted.
            let (changed, w) = try await offline(d, errorsBefore: 1, [
                { db in
                    try db.set(classIndex: 0, key: .string("doc-a"), property: 4, value: .int(50))
                    try db.modifyList(classIndex: 0, key: .string("doc-a"), property: tags, .insert(2, .string("z")))
                },
                { try $0.set(classIndex: 0, key: .string("doc-a"), property: 2, value: .string("B")) }, // stands
            ])
            #expect(changed.compensatingWrites == [.outsideView(objectType: "Doc", primaryKey: .string("doc-a"))])
            let expected = RevertedObject(objectType: "Doc", primaryKey: .string("doc-a"), revert: .changed, values: [
                RevertedValue(property: 4, name: "rank", value: .int(50)),
                RevertedValue(property: 5, name: "tags", value: .list([.string("x"), .string("y"), .string("z")])),
            ], writes: [
                LocalWrite(version: w[0], instruction: .set(table: "Doc", key: .string("doc-a"), field: "rank", value: .int(50))),
                LocalWrite(version: w[0], instruction: .listInsert(table: "Doc", key: .string("doc-a"), field: "tags", index: 2, value: .string("z"))),
            ])
            #expect(changed.revertedObjects == [expected])
            let row = try #require(try d.db.object(classIndex: 0, key: .string("doc-a")))
            #expect(row[2] == .string("B") && row[4] == .int(1) && row[tags] == .list([.string("x"), .string("y")]))
            try d.db.reapply(expected, overriding: [(4, .int(3))])
            try await d.sync()
            try await d.waitDownload()
            let back = try #require(try d.db.object(classIndex: 0, key: .string("doc-a")))
            #expect(back[4] == .int(3) && back[tags] == .list([.string("x"), .string("y"), .string("z")]))
            #expect(d.errors.all.count == 2)
        }
    }
}
