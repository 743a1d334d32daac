import FerryCore
import FerrySyncStorage
import Testing

/// The app's sync state (terminate, enable, the sync identity, the admin revision) and the
/// shared secret: the same on every node and across restarts.
@Suite("Storage: sync state and shared secrets")
struct SyncStateTests {
    @Test(arguments: Backend.all)
    func terminateAndEnable(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let initial = try await s.syncState()
            #expect(initial.enabled)
            #expect(initial.headVersion == 0)
            let file = try await s.newClientFile(userId: "u1")

            let terminated = try await s.setSyncEnabled(false)
            #expect(!terminated.enabled)
            #expect(terminated.generation == initial.generation)
            #expect(terminated.revision > initial.revision)
            #expect(try await s.syncState() == terminated)
            // Terminating does not forget client files; terminating again changes nothing.
            #expect(try await s.clientFile(file.ident) != nil)
            #expect(try await s.setSyncEnabled(false) == terminated)

            let enabled = try await s.setSyncEnabled(true)
            #expect(enabled.enabled)
            #expect(enabled.generation > terminated.generation)
            #expect(enabled.revision > terminated.revision)
            #expect(try await s.syncState() == enabled)
            #expect(try await s.clientFile(file.ident) == nil)
            #expect(try await s.clientFileCount(userId: "u1") == 0)
            // Enabling an enabled app changes nothing.
            #expect(try await s.setSyncEnabled(true) == enabled)

            try await s.bumpStateRevision()
            let bumped = try await s.syncState()
            #expect(bumped.revision > enabled.revision)
            #expect(bumped.enabled && bumped.generation == enabled.generation)
        }
    }

    @Test(arguments: Backend.all)
    func pauseAndResumeKeepTheSyncIdentityAndClientFiles(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let initial = try await s.syncState()
            #expect(initial.mode == .enabled && !initial.paused)
            let file = try await s.newClientFile(userId: "u1")

            let paused = try await s.setSyncPaused(true)
            #expect(paused.mode == .paused)
            #expect(!paused.enabled && paused.paused)
            #expect(paused.generation == initial.generation)
            #expect(paused.revision > initial.revision)
            #expect(try await s.syncState() == paused)
            #expect(try await s.clientFile(file.ident) != nil)
            // Pausing again, or enabling a paused app, changes nothing (not even the revision).
            #expect(try await s.setSyncPaused(true) == paused)
            #expect(try await s.setSyncEnabled(true) == paused)
            #expect(try await s.clientFile(file.ident) != nil)

            let resumed = try await s.setSyncPaused(false)
            #expect(resumed.mode == .enabled)
            #expect(resumed.generation == initial.generation)
            #expect(resumed.revision > paused.revision)
            #expect(try await s.syncState() == resumed)
            #expect(try await s.clientFile(file.ident).map { [$0.ident, $0.salt] } == [file.ident, file.salt])
            #expect(try await s.clientFileCount(userId: "u1") == 1)
            // Resuming an enabled app changes nothing.
            #expect(try await s.setSyncPaused(false) == resumed)
        }
    }

    @Test(arguments: Backend.all)
    func terminateWhilePausedNeedsAnEnableThatForgetsClientFiles(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let initial = try await s.syncState()
            let file = try await s.newClientFile(userId: "u1")
            let paused = try await s.setSyncPaused(true)

            let terminated = try await s.setSyncEnabled(false)
            #expect(terminated.mode == .terminated)
            #expect(!terminated.enabled && !terminated.paused)
            #expect(terminated.revision > paused.revision)
            #expect(terminated.generation == initial.generation)
            // A terminate is not resumed, nor paused.
            #expect(try await s.setSyncPaused(false) == terminated)
            #expect(try await s.setSyncPaused(true) == terminated)
            #expect(try await s.clientFile(file.ident) != nil)

            let enabled = try await s.setSyncEnabled(true)
            #expect(enabled.mode == .enabled)
            #expect(enabled.generation > initial.generation)
            #expect(enabled.revision > terminated.revision)
            #expect(try await s.clientFile(file.ident) == nil)
            #expect(try await s.clientFileCount(userId: "u1") == 0)
        }
    }

    @Test(arguments: Backend.all)
    func theRevisionGrowsWithEveryChange(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            var last = try await s.syncState().revision
            func grew(_ state: SyncState) -> Bool {
                defer { last = state.revision }
                return state.revision > last
            }
            #expect(grew(try await s.setSyncPaused(true)))
            #expect(grew(try await s.setSyncPaused(false)))
            #expect(grew(try await s.setSyncPaused(true)))
            #expect(grew(try await s.setSyncEnabled(false)))
            #expect(grew(try await s.setSyncEnabled(true)))
            #expect(grew(try await s.setSyncPaused(true)))
            #expect(grew(try await s.setSyncPaused(false)))
            #expect(try await s.syncState().revision == last)
        }
    }

    @Test(arguments: Backend.all)
    func theSharedSecretIsCreatedOnce(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let first: [UInt8] = [1, 2, 3, 0, 255]
            #expect(try await s.sharedSecret(named: "jwt") { first } == first)
            #expect(try await s.sharedSecret(named: "jwt") { [9, 9] } == first)
            #expect(try await s.sharedSecret(named: "other") { [7] } == [7])
            // Concurrent first calls (several nodes starting): one value wins, everyone gets it.
            let got = try await withThrowingTaskGroup(of: [UInt8].self) { group in
                for i in 0..<8 { group.addTask { try await s.sharedSecret(named: "race") { [UInt8(i), 42] } } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(got).count == 1)
            #expect(try await s.sharedSecret(named: "race") { [0xEE] } == got[0])
        }
    }
}
