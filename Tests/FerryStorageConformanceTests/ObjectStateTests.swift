import FerryCore
import FerrySyncStorage
import Testing

/// An object's merge state (values, per-property stamps and versions, list operations) and
/// tombstones come back exactly as written: merges on any node depend on every bit of it.
@Suite("Storage: object merge state")
struct ObjectStateTests {
    @Test(arguments: Backend.all)
    func storedObjectsRoundTripExactly(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let withLists = StoredObject(object: Fixtures.item(1), lists: Fixtures.tagLog())
            let plain = StoredObject(object: Fixtures.item(2, tags: []))
            let note = StoredObject(object: Fixtures.note("n1", "héllo ✓\u{0}tail"))
            try await s.commit([Fixtures.itemKey(1): withLists, Fixtures.itemKey(2): plain, Fixtures.noteKey("n1"): note],
                               clientFile: file.ident, clientVersion: 1)

            #expect(try await s.object(Fixtures.itemKey(1), schema: Fixtures.item) == withLists)
            #expect(try await s.object(Fixtures.itemKey(2), schema: Fixtures.item) == plain)
            #expect(try await s.object(Fixtures.noteKey("n1"), schema: Fixtures.note) == note)
            #expect(try await s.object(Fixtures.itemKey(3), schema: Fixtures.item) == nil)

            // Inside a transaction: the objects that exist, keyed as asked, across classes.
            let keys = [Fixtures.itemKey(1), Fixtures.itemKey(3), Fixtures.noteKey("n1"), Fixtures.noteKey("missing")]
            let read = try await s.writeTransaction { tx in try await tx.objects(keys, schema: Fixtures.schema) }
            #expect(read == [Fixtures.itemKey(1): withLists, Fixtures.noteKey("n1"): note])
            // Outside any transaction (an upload's merge before it takes the write lock): the same.
            #expect(try await s.objects(keys, schema: Fixtures.schema) == read)
            #expect(try await s.objects([], schema: Fixtures.schema).isEmpty)

            let changes = try await s.allChanges(since: 0, Fixtures.item)
            #expect(changes.count == 2)
            #expect(Set(changes.map(\.version)) == [1])
            #expect(changes.first { $0.key == Fixtures.itemKey(1).key } == Change(key: Fixtures.itemKey(1).key, object: Fixtures.item(1), version: 1))
            #expect(try await s.allChanges(since: 0, Fixtures.note) == [Change(key: .string("n1"), object: note.object, version: 1)])
        }
    }

    @Test(arguments: Backend.all)
    func tombstonesKeepTheirErasedState(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.commit([Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1)),
                                Fixtures.itemKey(2): StoredObject(object: Fixtures.item(2))], clientFile: file.ident)
            let erased = StoredObject(object: nil, lists: Fixtures.tagLog(version: 2), erasedState: Fixtures.item(1))
            // A tombstone from before the store kept erased states has none.
            let bare = StoredObject(object: nil)
            try await s.commit([Fixtures.itemKey(1): erased, Fixtures.itemKey(2): bare], clientFile: file.ident)

            #expect(try await s.object(Fixtures.itemKey(1), schema: Fixtures.item) == erased)
            #expect(try await s.object(Fixtures.itemKey(2), schema: Fixtures.item) == bare)
            let changes = try await s.allChanges(since: 1, Fixtures.item)
            #expect(changes.count == 2)
            #expect(changes.contains(Change(key: Fixtures.itemKey(1).key, object: nil, erasedState: Fixtures.item(1), version: 2)))
            #expect(changes.contains(Change(key: Fixtures.itemKey(2).key, object: nil, erasedState: nil, version: 2)))
            #expect(try await s.allChanges(since: 2, Fixtures.item).isEmpty)
            // A snapshot's scan of live objects skips tombstones; its changes include them.
            let (live, snapshotChanges) = try await s.withSnapshot { snap in
                (try await snap.allObjects(Fixtures.item), try await snap.allChanges(since: 1, Fixtures.item))
            }
            #expect(live.isEmpty)
            #expect(snapshotChanges.count == 2)
            #expect(snapshotChanges.contains(Change(key: Fixtures.itemKey(1).key, object: nil, erasedState: Fixtures.item(1), version: 2)))

            // Created again: live, with no erased state left over.
            let again = StoredObject(object: Fixtures.item(1, complexity: 9, version: 3))
            try await s.commit([Fixtures.itemKey(1): again], clientFile: file.ident)
            #expect(try await s.object(Fixtures.itemKey(1), schema: Fixtures.item) == again)
            #expect(try await s.allChanges(since: 2, Fixtures.item) == [Change(key: Fixtures.itemKey(1).key, object: again.object, version: 3)])
        }
    }
}
