import FerryCore
import FerrySyncStorage
import Testing

/// A snapshot is one state of the store: a new subscription set's view is evaluated on it and
/// the session catches up from its version, so a commit it missed must come after `version`.
@Suite("Storage: snapshots")
struct SnapshotTests {
    @Test(arguments: Backend.all)
    func aSnapshotDoesNotSeeLaterCommits(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            for n: UInt8 in 1...3 {
                try await s.commit([Fixtures.itemKey(n): StoredObject(object: Fixtures.item(n, version: UInt64(n)))], clientFile: file.ident)
            }
            let (version, objects, changes) = try await s.withSnapshot { snap in
                let version = snap.version
                // Commits while the snapshot is open: a change, a new object, an erase.
                try await s.commit([Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, complexity: 42, version: 4)),
                                    Fixtures.itemKey(4): StoredObject(object: Fixtures.item(4, version: 4)),
                                    Fixtures.itemKey(2): StoredObject(object: nil, erasedState: Fixtures.item(2, version: 2))],
                                   clientFile: file.ident)
                return (version, try await snap.allObjects(Fixtures.item), try await snap.allChanges(since: 0, Fixtures.item))
            }
            #expect(version == 3)
            #expect(objects == [Fixtures.itemKey(1).key: Fixtures.item(1, version: 1), Fixtures.itemKey(2).key: Fixtures.item(2, version: 2),
                                Fixtures.itemKey(3).key: Fixtures.item(3, version: 3)])
            #expect(changes.map(\.version) == [1, 2, 3])
            #expect(changes.allSatisfy { $0.object != nil })
            // The store itself has moved on.
            #expect(try await s.head() == 4)
            let later = try await s.withSnapshot { snap in (snap.version, try await snap.allObjects(Fixtures.item).count) }
            #expect(later.0 == 4)
            #expect(later.1 == 3)
        }
    }

    @Test(arguments: Backend.all)
    func aSnapshotOfAnEmptyStoreIsAtVersionZero(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let (version, count) = try await store.storage.withSnapshot { snap in
                (snap.version, try await snap.allObjects(Fixtures.item).count)
            }
            #expect(version == 0)
            #expect(count == 0)
        }
    }

    /// The Data API's keyset paging: pages of live objects in encoded-key order, each page
    /// starting after the last key of the one before, erased objects left out, the same
    /// objects as `forEachObject` altogether.
    @Test(arguments: Backend.all)
    func pagesOfObjectsFollowEachOtherInKeyOrderWithoutTheErased(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            var objects: [ObjectKey: StoredObject] = [:]
            for n: UInt8 in 1...7 { objects[Fixtures.itemKey(n)] = StoredObject(object: Fixtures.item(n, version: 1)) }
            try await s.commit(objects, clientFile: file.ident)
            try await s.commit([Fixtures.itemKey(4): StoredObject(object: nil, erasedState: Fixtures.item(4, version: 1))], clientFile: file.ident)
            try await s.withSnapshot { snap in
                var pages: [[FerryValue]] = []
                var after: [UInt8]? = nil
                while true {
                    let page = try await snap.objects(of: Fixtures.item, after: after, limit: 2)
                    if page.isEmpty { break }
                    pages.append(page.map(\.key))
                    #expect(page.allSatisfy { ValueCodec.encode($0.key) == $0.rawKey })
                    after = page.last?.rawKey
                }
                #expect(pages.map(\.count) == [2, 2, 2])
                let all = try await snap.allObjects(Fixtures.item)
                #expect(Set(pages.joined()) == Set(all.keys))
                #expect(!pages.joined().contains(Fixtures.itemKey(4).key))
                let raw = pages.joined().map { ValueCodec.encode($0) }
                #expect(raw == raw.sorted { $0.lexicographicallyPrecedes($1) })
                #expect(try await snap.objects(of: Fixtures.item, after: nil, limit: 0).isEmpty)
            }
        }
    }
}
