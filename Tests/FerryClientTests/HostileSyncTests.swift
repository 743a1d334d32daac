import FerryClient
import FerryCore
@testable import FerryServer
import Foundation
import Testing

/// Issue 11: what a hostile (or careless) device can do to other users through the sync
/// protocol, each checked with a raw protocol client against a real in-process server.
@Suite("Hostile devices: keys, limits, work, protocol violations")
struct HostileSyncTests {
    static let everything = [Subscription(name: "all", objectType: "Item", query: "TRUEPREDICATE")]

    /// The primary keys of every instruction in the DOWNLOAD messages up to the end of a batch.
    static func downloadedKeys(_ client: RawSyncClient, session: UInt64) async throws -> Set<FerryValue> {
        var keys: Set<FerryValue> = []
        while true {
            guard let m = await client.next(seconds: 60) else { throw FerryError(.timeout, "no end of the download batch") }
            if case .error(let e) = m { throw FerryError(.io, "the server answered error \(e.code): \(e.message)") }
            guard case let .download(s, _, _, _, _, last, changesets) = m, s == session else { continue }
            for c in changesets { for i in try ChangesetCodec.decode(c.changeset).instructions { keys.insert(i.key) } }
            if last { return keys }
        }
    }

    /// The next ERROR from the server (skipping other messages); nil on close or timeout.
    static func nextError(_ client: RawSyncClient) async -> ProtocolError? {
        guard case .error(let e)? = await client.next(where: { if case .error = $0 { return true } else { return false } }) else { return nil }
        return e
    }

    /// Binds a new client file on `session` and returns its identity.
    static func newClientFile(_ client: RawSyncClient, session: UInt64) async throws -> (ident: UInt64, salt: UInt64) {
        try await client.send(.bind(session: session, database: "raw", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0))
        guard case let .ident(_, ident, salt)? = await client.next(where: { if case .ident = $0 { return true } else { return false } }) else {
            throw FerryError(.timeout, "no IDENT")
        }
        return (ident, salt)
    }

    /// Point 10: a device that claims an old last server version learned the primary key of
    /// every object changed since, other users' deleted ones included.
    @Test func catchUpErasesNameOnlyObjectsTheUserMayRead() async throws {
        try await SyncTestServer.withServer { url in
            let victim = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { victim.close() }
            try await victim.subscribe("TRUEPREDICATE")
            let ids = (0..<4).map { _ in ObjectId.generate() }
            for (n, id) in ids.enumerated() { try victim.createItem(id, owner: victim.user.id, name: "secret \(n)", complexity: Int64(n)) }
            try await victim.sync()
            // A deleted object and a changed one.
            try victim.write { db in
                try db.delete(classIndex: 0, key: .objectId(ids[0]))
                try db.set(classIndex: 0, key: .objectId(ids[1]), property: 3, value: .int(2))
            }
            try await victim.sync()

            let attacker = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: attacker.token) { client in
                let file = try await Self.newClientFile(client, session: 1)
                try await client.send(.unbind(session: 1))
                // Bound again claiming it last synced at server version 1.
                try await client.send(.bind(session: 2, database: "raw", clientFileIdent: file.ident, clientFileSalt: file.salt, lastServerVersion: 1))
                try await client.send(.query(session: 2, version: 1, subscriptions: Self.everything))
                let keys = try await Self.downloadedKeys(client, session: 2)
                let leaked = keys.intersection(ids.map { FerryValue.objectId($0) })
                #expect(leaked.isEmpty, "the attacker learned \(leaked.count) of the victim's primary keys")
            }
        }
    }

    /// Point 11: a create with a key another user's object already holds (a guessed key) is
    /// refused with its own reason, and the other user's object is untouched.
    @Test func createOfAKeyTakenByAnUnreadableObjectHasItsOwnReason() async throws {
        try await SyncTestServer.withServer { url in
            let first = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { first.close() }
            let second = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { second.close() }
            try await first.subscribe("TRUEPREDICATE")
            try await second.subscribe("TRUEPREDICATE")
            let key = ObjectId.generate()
            try first.createItem(key, owner: first.user.id, name: "first", complexity: 1)
            try await first.sync()
            try second.createItem(key, owner: second.user.id, name: "second", complexity: 2)
            let errors = await second.errors.wait(count: 1)
            #expect(errors.first?.compensatingWrites == [.keyTaken(objectType: "Item", primaryKey: .objectId(key))])
            #expect(errors.first?.compensatingWrites.first?.reason ==
                    "create of \"\(key.hexString)\" in table \"Item\" not allowed; the primary key is already in use by an object the user may not read")
            try await second.sync()
            #expect(try second.item(key) == nil)
            try await first.sync()
            #expect(try first.item(key)?[2] == .string("first"))
        }
    }

    /// Point 5: a subscription set is bounded before anything of it is compiled.
    @Test func hugeSubscriptionSetIsRefusedClearly() async throws {
        try await SyncTestServer.withServer { url in
            let user = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: user.token) { client in
                _ = try await Self.newClientFile(client, session: 1)
                let many = (0..<50_000).map { Subscription(name: "s\($0)", objectType: "Item", query: "complexity == \($0)") }
                try await client.send(.query(session: 1, version: 1, subscriptions: many))
                guard let e = await Self.nextError(client) else {
                    Issue.record("no answer to the QUERY"); return
                }
                #expect(e.code == 226)
                #expect(e.message == "the subscription set has 50000 subscriptions; at most 1000 are allowed")
                // The session goes on with a set in bounds.
                try await client.send(.query(session: 1, version: 2, subscriptions: Self.everything))
                _ = try await Self.downloadedKeys(client, session: 1)
            }
        }
    }

    /// A set in bounds whose view costs every term on every stored object (2,000 objects,
    /// 10,000 terms that never match).
    static func expensiveSet() -> [Subscription] {
        (0..<1_000).map { n in
            Subscription(name: "s\(n)", objectType: "Item", query: (0..<10).map { "complexity == \(-1 - n * 10 - $0)" }.joined(separator: " OR "))
        }
    }

    static func storeItems(_ device: TestDevice, count: Int) async throws {
        try device.write { db in
            for n in 0..<count {
                try db.create(classIndex: 0, values: [(0, .objectId(ObjectId.generate())), (1, .string(device.user.id)), (2, .string("item \(n)")), (3, .int(Int64(n % 5)))])
            }
        }
        try await device.sync()
    }

    /// Point 5: the view of a large set is evaluated beside the hub: another user's upload is
    /// acknowledged while it runs (on the hub it waited for the whole evaluation).
    @Test func expensiveViewDoesNotHoldUpOtherUsersUploads() async throws {
        try await Self.afterAnExpensiveQuery { client, writer in
            // The writer's upload is acknowledged before the set's answer arrives.
            try writer.createItem(ObjectId.generate(), owner: writer.user.id, name: "during", complexity: 1)
            try await writer.waitUpload()
            let answered = await client.next(seconds: 0.001)
            #expect(answered == nil, "the expensive QUERY was answered before another user's upload")
            _ = try await Self.downloadedKeys(client, session: 1)
        }
    }

    /// A writer that stored 2,000 items, and an attacker of another user that has just sent
    /// `expensiveSet()`; `body` runs while the server evaluates it.
    static func afterAnExpensiveQuery(configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
                                      _ body: @escaping @Sendable (RawSyncClient, TestDevice) async throws -> Void) async throws {
        try await SyncTestServer.withServer(configure: configure) { url in
            let writer = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { writer.close() }
            try await writer.subscribe("TRUEPREDICATE")
            try await storeItems(writer, count: 2_000)
            let attacker = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: attacker.token) { client in
                _ = try await newClientFile(client, session: 1)
                try await client.send(.query(session: 1, version: 1, subscriptions: expensiveSet()))
                try await body(client, writer)
            }
        }
    }

    /// Point 5: an evaluation past its time is stopped and the set rejected (226).
    @Test func viewEvaluationHasADeadline() async throws {
        try await Self.afterAnExpensiveQuery(configure: { $0.syncLimits.viewEvaluationSeconds = 0.05 }) { client, _ in
            guard let e = await Self.nextError(client) else {
                Issue.record("no answer to the QUERY"); return
            }
            #expect(e.code == 226)
            #expect(e.message.hasPrefix("the subscription set took longer than"))
        }
    }

    /// Point 12: a server-only message from a client is answered with error 201 and the
    /// connection is closed, as docs/protocol.md says.
    @Test func serverOnlyMessageClosesTheConnection() async throws {
        try await SyncTestServer.withServer { url in
            let user = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: user.token) { client in
                try await client.send(.ident(session: 1, clientFileIdent: 5, clientFileSalt: 5))
                guard case .error(let e)? = await client.next() else { Issue.record("no error"); return }
                #expect(e.code == 201)
                #expect(await client.waitClosed(seconds: 20))
            }
        }
    }

    /// Point 12: client files are bounded per user; past the bound the least recently seen
    /// one is forgotten (that device resets when it returns).
    @Test func clientFilesAreBoundedPerUser() async throws {
        try await SyncTestServer.withServer(configure: { $0.syncLimits.maxClientFilesPerUser = 2 }) { url in
            let user = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: user.token) { client in
                var files: [(ident: UInt64, salt: UInt64)] = []
                for session in UInt64(1)...4 { files.append(try await Self.newClientFile(client, session: session)) }
                // The first two were forgotten: binding them again asks for a client reset.
                try await client.send(.bind(session: 10, database: "raw", clientFileIdent: files[0].ident, clientFileSalt: files[0].salt, lastServerVersion: 0))
                guard let e = await Self.nextError(client) else {
                    Issue.record("no error"); return
                }
                #expect(e.code == 208 && e.session == 10)
                // The newest still binds (a MARK round trip proves the session is bound).
                try await client.send(.bind(session: 11, database: "raw", clientFileIdent: files[3].ident, clientFileSalt: files[3].salt, lastServerVersion: 0))
                try await client.send(.mark(session: 11, request: 7))
                let m = await client.next(where: { if case .mark = $0 { return true }; if case .error = $0 { return true }; return false })
                #expect(m == .mark(session: 11, request: 7))
            }
        }
    }

    /// Point 12: the event log keeps a bounded text per entry, and a rejected query's error
    /// quotes only the start of it.
    @Test func eventLogAndErrorsKeepSmallTexts() async throws {
        let log = ServerEventLog()
        await log.record(kind: "subscription_error", userId: "u", message: String(repeating: "x", count: 1 << 20))
        #expect(await log.recent(limit: 1).first!.message.utf8.count < 2_100)
        try await SyncTestServer.withServer { url in
            let user = try await RawSyncClient.anonymousUser(url)
            try await RawSyncClient.connect(url, token: user.token) { client in
                _ = try await Self.newClientFile(client, session: 1)
                let bad = Subscription(name: "bad", objectType: "Item", query: "complexity == " + String(repeating: "(", count: 100_000))
                try await client.send(.query(session: 1, version: 1, subscriptions: [bad]))
                guard let e = await Self.nextError(client) else {
                    Issue.record("no error"); return
                }
                #expect(e.code == 226)
                #expect(e.message.utf8.count < 1_000)
            }
        }
    }
}
