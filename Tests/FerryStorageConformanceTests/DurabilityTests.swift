import FerryCore
import FerrySyncStorage
import Testing

/// Once `writeTransaction` returns, the server acknowledges the upload to its device, which
/// then forgets it: it must be in the store for any later instance, whatever happens to this
/// one.
@Suite("Storage: durability")
struct DurabilityTests {
    static let live = StoredObject(object: Fixtures.item(1), lists: Fixtures.tagLog())
    static let tombstone = StoredObject(object: nil, erasedState: Fixtures.item(2))

    /// What the first instance committed, as any later instance must see it.
    static func expectCommitted(_ s: any SyncStorage, file: UInt64, head: UInt64) async throws {
        #expect(try await s.head() == head)
        #expect(try await s.object(Fixtures.itemKey(1), schema: Fixtures.item) == live)
        #expect(try await s.object(Fixtures.itemKey(2), schema: Fixtures.item) == tombstone)
        let record = try #require(try await s.clientFile(file))
        #expect(record.acknowledgedClientVersion == 7)
        #expect(record.subscriptions == Fixtures.subscriptions)
        #expect(try await s.allChanges(since: 0, Fixtures.item).map(\.version) == [1, 1])
    }

    @Test(arguments: Backend.all)
    func anAcknowledgedUploadIsThereForANewInstance(_ backend: Backend) async throws {
        try await backend.withPlace { place in
            let (file, head) = try await place.withOpen { first in
                let file = try await first.storage.newClientFile(userId: "u1")
                try await first.storage.saveSubscriptions(clientFile: file.ident, version: 2, subscriptions: Fixtures.subscriptions)
                let head = try await first.storage.commit([Fixtures.itemKey(1): Self.live, Fixtures.itemKey(2): Self.tombstone],
                                                          clientFile: file.ident, clientVersion: 7)
                // A second instance while the first is still open, as after a crash: nothing
                // the first does on close can matter.
                try await place.withOpen { second in try await Self.expectCommitted(second.storage, file: file.ident, head: head) }
                return (file.ident, head)
            }
            // And one after the first closed, whose history goes on from the stored head.
            try await place.withOpen { third async throws in
                try await Self.expectCommitted(third.storage, file: file, head: head)
                let next = try await third.storage.commit([Fixtures.itemKey(3): StoredObject(object: Fixtures.item(3))], clientFile: file)
                #expect(next == head + 1)
            }
        }
    }

    @Test(arguments: Backend.all)
    func aPauseSurvivesAReopenAndAResumeThenKeepsTheClientFiles(_ backend: Backend) async throws {
        try await backend.withPlace { place in
            let (paused, file) = try await place.withOpen { first in
                let file = try await first.storage.newClientFile(userId: "u1")
                return (try await first.storage.setSyncPaused(true), file)
            }
            #expect(paused.mode == .paused)
            let resumed = try await place.withOpen { second in
                #expect(try await second.storage.syncState() == paused)
                return try await second.storage.setSyncPaused(false)
            }
            #expect(resumed.mode == .enabled && resumed.generation == paused.generation && resumed.revision > paused.revision)
            try await place.withOpen { third async throws in
                #expect(try await third.storage.syncState() == resumed)
                #expect(try await third.storage.clientFile(file.ident).map { [$0.ident, $0.salt] } == [file.ident, file.salt])
            }
        }
    }

    @Test(arguments: Backend.all)
    func syncStateAndSecretsSurviveAReopen(_ backend: Backend) async throws {
        try await backend.withPlace { place in
            let (state, secret) = try await place.withOpen { first in
                let s = first.storage
                _ = try await s.setSyncEnabled(false)
                _ = try await s.setSyncEnabled(true)
                _ = try await s.setSyncEnabled(false)
                try await s.bumpStateRevision()
                return (try await s.syncState(), try await s.sharedSecret(named: "jwt") { [4, 5, 6] })
            }
            let (reopened, secretAgain) = try await place.withOpen { second in
                (try await second.storage.syncState(), try await second.storage.sharedSecret(named: "jwt") { [0] })
            }
            #expect(reopened == state)
            #expect(!reopened.enabled)
            #expect(secretAgain == secret)
        }
    }
}
