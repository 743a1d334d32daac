import FerryCore
import FerrySyncStorage
import Testing

/// What the server knows of each device's database: identity, acknowledged version,
/// subscription set, when it was last seen (the per-user limit forgets the least recent).
@Suite("Storage: client files")
struct ClientFileTests {
    @Test(arguments: Backend.all)
    func newClientFilesAreReadBackAndCountedPerUser(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let before = Int(WallClock.system.secondsSinceEpoch())
            let a = try await s.newClientFile(userId: "u1")
            let b = try await s.newClientFile(userId: "u1")
            let c = try await s.newClientFile(userId: "u2")
            #expect(Set([a.ident, b.ident, c.ident]).count == 3)
            #expect(![a.ident, b.ident, c.ident].contains(0))
            #expect(a.salt != 0 && b.salt != 0 && a.salt != b.salt)
            #expect(a.userId == "u1" && c.userId == "u2")
            #expect(a.acknowledgedClientVersion == 0 && a.subscriptionVersion == 0 && a.subscriptions.isEmpty)
            #expect(a.lastSeen >= before && a.lastSeen <= Int(WallClock.system.secondsSinceEpoch()))
            #expect(try await s.clientFile(a.ident) == a)
            #expect(try await s.clientFile(c.ident) == c)
            #expect(try await s.clientFile(c.ident + b.ident + a.ident + 1000) == nil)
            #expect(try await s.clientFileCount(userId: "u1") == 2)
            #expect(try await s.clientFileCount(userId: "u2") == 1)
            #expect(try await s.clientFileCount(userId: "nobody") == 0)
        }
    }

    @Test(arguments: Backend.all)
    func subscriptionsAreSavedAndReadBack(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let other = try await s.newClientFile(userId: "u1")
            try await s.saveSubscriptions(clientFile: file.ident, version: 3, subscriptions: Fixtures.subscriptions)
            let saved = try #require(try await s.clientFile(file.ident))
            #expect(saved.subscriptionVersion == 3)
            #expect(saved.subscriptions == Fixtures.subscriptions)
            #expect(try await s.clientFile(other.ident)?.subscriptions == [])
            try await s.saveSubscriptions(clientFile: file.ident, version: 4, subscriptions: [])
            let emptied = try #require(try await s.clientFile(file.ident))
            #expect(emptied.subscriptionVersion == 4)
            #expect(emptied.subscriptions.isEmpty)
        }
    }

    @Test(arguments: Backend.all)
    func touchedFilesAreKeptAndTheLeastRecentIsForgotten(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let a = try await s.newClientFile(userId: "u1")
            let b = try await s.newClientFile(userId: "u1")
            let c = try await s.newClientFile(userId: "u1")
            let elsewhere = try await s.newClientFile(userId: "u2")
            try await s.touchClientFile(a.ident, at: 3_000)
            try await s.touchClientFile(b.ident, at: 1_000)
            try await s.touchClientFile(c.ident, at: 2_000)
            try await s.touchClientFile(elsewhere.ident, at: 10)
            #expect(try await s.clientFile(b.ident)?.lastSeen == 1_000)

            try await s.forgetLeastRecentClientFile(userId: "u1")
            #expect(try await s.clientFile(b.ident) == nil)
            #expect(try await s.clientFileCount(userId: "u1") == 2)
            try await s.forgetLeastRecentClientFile(userId: "u1")
            #expect(try await s.clientFile(c.ident) == nil)
            #expect(try await s.clientFile(a.ident)?.lastSeen == 3_000)
            #expect(try await s.clientFile(elsewhere.ident) != nil)

            try await s.forgetClientFile(a.ident)
            #expect(try await s.clientFile(a.ident) == nil)
            #expect(try await s.clientFileCount(userId: "u1") == 0)
            #expect(try await s.clientFileCount(userId: "u2") == 1)
            // Forgetting what is not there is no error.
            try await s.forgetClientFile(a.ident)
            try await s.forgetLeastRecentClientFile(userId: "u1")
            // Idents are not reused: a forgotten device that returns must not find another's file.
            let d = try await s.newClientFile(userId: "u1")
            #expect(![a.ident, b.ident, c.ident, elsewhere.ident].contains(d.ident))
        }
    }
}

/// The server version each client file had at its last bind, and the oldest of them (what the
/// history must still serve: `ferry_oldest_needed_version`).
@Suite("Storage: bound versions")
struct BoundVersionTests {
    @Test(arguments: Backend.all)
    func theOldestBoundVersionFollowsBindsAndForgottenFiles(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let s = store.storage
            #expect(try await s.oldestBoundVersion() == nil)
            let a = try await s.newClientFile(userId: "u1")
            // A new file counts at the head it was made at (0 here).
            #expect(try await s.oldestBoundVersion() == 0)
            try await s.clientFileBound(a.ident, at: 1_000, serverVersion: 7)
            #expect(try await s.oldestBoundVersion() == 7)
            #expect(try await s.clientFile(a.ident)?.lastSeen == 1_000)
            let b = try await s.newClientFile(userId: "u2")
            try await s.clientFileBound(b.ident, at: 1_000, serverVersion: 3)
            #expect(try await s.oldestBoundVersion() == 3)
            try await s.clientFileBound(b.ident, at: 2_000, serverVersion: 12)
            #expect(try await s.oldestBoundVersion() == 7)
            try await s.forgetClientFile(a.ident)
            #expect(try await s.oldestBoundVersion() == 12)
        }
    }
}
