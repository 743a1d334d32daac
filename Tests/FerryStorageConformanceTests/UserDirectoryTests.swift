import FerryAuth
import FerryCore
import Foundation
import Testing

/// The server's users through the `UserDirectory` protocol: identities, metadata, password
/// hashes (one per email, even under concurrent sign-ups), API keys, refresh tokens with their
/// expiry, and disabling.
@Suite("Storage: users")
struct UserDirectoryTests {
    static let anon = Identity(provider: "anon-user", providerUserId: "device-1")
    static let email = Identity(provider: "local-userpass", providerUserId: "ann@example.com")

    @Test(arguments: Backend.all)
    func usersAreFoundByIdAndIdentity(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            let data: [String: FerryValue] = ["name": .string("Ann"), "age": .int(41), "tags": .list([.string("a")]), "none": .null]
            let ann = try await d.createUser(identity: Self.email, data: data)
            #expect(ann.identities == [Self.email])
            #expect(ann.data == data)
            #expect(!ann.disabled)
            #expect(try await d.user(id: ann.id) == ann)
            #expect(try await d.user(identity: Self.email) == ann)
            // The same identity again is the same user.
            #expect(try await d.createUser(identity: Self.email, data: [:]).id == ann.id)

            let anon = try await d.createUser(identity: Self.anon, data: [:])
            #expect(anon.id != ann.id)
            #expect(Set(try await d.allUsers().map(\.id)) == [ann.id, anon.id])
            #expect(try await d.user(id: "no such user") == nil)
            #expect(try await d.user(identity: Identity(provider: "anon-user", providerUserId: "other")) == nil)

            try await d.updateData(userId: ann.id, data: ["name": .string("Ann B.")])
            #expect(try await d.user(id: ann.id)?.data == ["name": .string("Ann B.")])
            #expect(try await d.user(identity: Self.email)?.data == ["name": .string("Ann B.")])
        }
    }

    @Test(arguments: Backend.all)
    func refreshTokensExpireAndCanBeRevoked(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            let user = try await d.createUser(identity: Self.anon, data: [:])
            let expires = Date(timeIntervalSince1970: 2_000_000_000)
            try await d.storeRefreshToken(hash: "t1", userId: user.id, expires: expires)
            try await d.storeRefreshToken(hash: "t2", userId: user.id, expires: expires)
            #expect(try await d.refreshTokenUser(hash: "t1", now: expires.addingTimeInterval(-1)) == user.id)
            #expect(try await d.refreshTokenUser(hash: "t1", now: expires) == nil)
            #expect(try await d.refreshTokenUser(hash: "t1", now: expires.addingTimeInterval(1)) == nil)
            #expect(try await d.refreshTokenUser(hash: "unknown", now: expires.addingTimeInterval(-1)) == nil)
            try await d.revokeRefreshToken(hash: "t1")
            #expect(try await d.refreshTokenUser(hash: "t1", now: expires.addingTimeInterval(-1)) == nil)
            #expect(try await d.refreshTokenUser(hash: "t2", now: expires.addingTimeInterval(-1)) == user.id)
        }
    }

    @Test(arguments: Backend.all)
    func apiKeysNameTheirUser(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            let user = try await d.createUser(identity: Self.anon, data: [:])
            try await d.addAPIKey(userId: user.id, keyHash: "k1", name: "ci")
            #expect(try await d.userId(apiKeyHash: "k1") == user.id)
            #expect(try await d.userId(apiKeyHash: "k2") == nil)
        }
    }

    @Test(arguments: Backend.all)
    func aPasswordHashIsStoredOnlyIfTheEmailHasNone(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            #expect(try await d.passwordHash(email: "ann@example.com") == nil)
            let first = try await d.addPasswordHash(email: "ann@example.com", hash: "h1")
            let second = try await d.addPasswordHash(email: "ann@example.com", hash: "h2")
            #expect(first)
            #expect(!second, "an existing hash was replaced")
            #expect(try await d.passwordHash(email: "ann@example.com") == "h1")
            #expect(try await d.addPasswordHash(email: "bob@example.com", hash: "h3"))
            #expect(try await d.passwordHash(email: "bob@example.com") == "h3")
        }
    }

    /// Issue 22: a login upgrading a hash made at a lower cost replaces it only if it is still
    /// the one it verified; of concurrent upgrades exactly one wins.
    @Test(arguments: Backend.all)
    func aPasswordHashIsReplacedOnlyIfItIsStillTheOldOne(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            #expect(try await !d.replacePasswordHash(email: "ann@example.com", old: "h1", new: "h2"), "no account")
            #expect(try await d.addPasswordHash(email: "ann@example.com", hash: "h1"))
            #expect(try await !d.replacePasswordHash(email: "ann@example.com", old: "other", new: "h2"))
            #expect(try await d.passwordHash(email: "ann@example.com") == "h1")
            let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for i in 0..<8 {
                    group.addTask { ("new-\(i)", try await d.replacePasswordHash(email: "ann@example.com", old: "h1", new: "new-\(i)")) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = outcomes.filter(\.1).map(\.0)
            #expect(winners.count == 1)
            #expect(try await d.passwordHash(email: "ann@example.com") == winners.first)
        }
    }

    @Test(arguments: Backend.all)
    func ofConcurrentRegistrationsExactlyOneStoresItsHash(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            let outcomes = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for i in 0..<8 {
                    group.addTask { ("hash-\(i)", try await d.addPasswordHash(email: "race@example.com", hash: "hash-\(i)")) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let winners = outcomes.filter(\.1).map(\.0)
            #expect(winners.count == 1)
            #expect(try await d.passwordHash(email: "race@example.com") == winners.first)
        }
    }

    @Test(arguments: Backend.all)
    func aDisabledUserStaysDisabledUntilEnabled(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let d = store.users
            let user = try await d.createUser(identity: Self.anon, data: [:])
            let other = try await d.createUser(identity: Self.email, data: [:])
            try await d.setDisabled(userId: user.id, true)
            #expect(try await d.user(id: user.id)?.disabled == true)
            #expect(try await d.user(identity: Self.anon)?.disabled == true)
            #expect(try await d.allUsers().first { $0.id == user.id }?.disabled == true)
            #expect(try await d.user(id: other.id)?.disabled == false)
            try await d.setDisabled(userId: user.id, false)
            #expect(try await d.user(id: user.id)?.disabled == false)
        }
    }
}

/// The admin's deletion of a user and revocation of its sessions.
@Suite("Storage: deleting users and revoking sessions")
struct UserDeletionTests {
    @Test(arguments: Backend.all)
    func aDeletedUserIsGoneWithItsIdentitiesPasswordKeysAndTokens(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let d = store.users
            let email = Identity(provider: "local-userpass", providerUserId: "gone@example.com")
            let ann = try await d.createUser(identity: email, data: [:])
            #expect(try await d.addPasswordHash(email: "gone@example.com", hash: "h"))
            try await d.addAPIKey(userId: ann.id, keyHash: "k", name: "key")
            try await d.storeRefreshToken(hash: "r", userId: ann.id, expires: Date().addingTimeInterval(3600))
            let bob = try await d.createUser(identity: Identity(provider: "anon-user", providerUserId: "b"), data: [:])
            try await d.storeRefreshToken(hash: "rb", userId: bob.id, expires: Date().addingTimeInterval(3600))

            try await d.deleteUser(id: ann.id)
            #expect(try await d.user(id: ann.id) == nil)
            #expect(try await d.user(identity: email) == nil)
            #expect(try await d.passwordHash(email: "gone@example.com") == nil)
            #expect(try await d.userId(apiKeyHash: "k") == nil)
            #expect(try await d.refreshTokenUser(hash: "r", now: Date()) == nil)
            #expect(try await d.allUsers().map(\.id) == [bob.id])
            #expect(try await d.refreshTokenUser(hash: "rb", now: Date()) == bob.id)
            // Deleting a user that is not there changes nothing.
            try await d.deleteUser(id: ann.id)
        }
    }

    @Test(arguments: Backend.all)
    func revokingSessionsEndsEveryRefreshTokenOfTheUserAndDatesTheRevocation(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let d = store.users
            let ann = try await d.createUser(identity: Identity(provider: "anon-user", providerUserId: "a"), data: [:])
            let bob = try await d.createUser(identity: Identity(provider: "anon-user", providerUserId: "b"), data: [:])
            let later = Date().addingTimeInterval(3600)
            try await d.storeRefreshToken(hash: "a1", userId: ann.id, expires: later)
            try await d.storeRefreshToken(hash: "a2", userId: ann.id, expires: later)
            try await d.storeRefreshToken(hash: "b1", userId: bob.id, expires: later)
            try await d.revokeSessions(userId: ann.id, validAfter: 1_900_000_000)
            #expect(try await d.refreshTokenUser(hash: "a1", now: Date()) == nil)
            #expect(try await d.refreshTokenUser(hash: "a2", now: Date()) == nil)
            #expect(try await d.refreshTokenUser(hash: "b1", now: Date()) == bob.id)
            #expect(try await d.user(id: ann.id)?.sessionsValidAfter == 1_900_000_000)
            #expect(try await d.allUsers().first { $0.id == ann.id }?.sessionsValidAfter == 1_900_000_000)
            #expect(try await d.user(id: bob.id)?.sessionsValidAfter == 0)
        }
    }
}
