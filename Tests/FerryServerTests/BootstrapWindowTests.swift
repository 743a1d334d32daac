import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 22, point 11: a subscription set is recorded as what a device's data reflects just
/// before its bootstrap goes out. If the connection drops before the device integrated it,
/// the device binds again from its older version; had it sent only the same set again, the
/// server would take the set as reflected and send only what changed since that version, so
/// objects that entered the view earlier never reach the device. A version cannot tell the two
/// apart (a device already at the head when it subscribes gets a bootstrap at its own
/// version), so the device says it: a set still pending at a bind is sent after the set its
/// data reflects (the last one it completed, version 0 and empty if none), as Realm's IDENT
/// names the client's active query version. The server then goes from the recorded set to the
/// reflected one and back to the pending one, and sends whatever enters it.
@Suite("Server: a bootstrap the device did not integrate")
struct BootstrapWindowTests {
    static func messages(_ c: RawClient) -> [ProtocolMessage] { messages(c.received) }

    /// (Inside a wait, only its `received` may be read: the client's own is behind the lock.)
    static func messages(_ received: [UInt8]) -> [ProtocolMessage] {
        guard let head = WireFormat.response(received) else { return [] }
        return WireFormat.messages(WireFormat.frames(received[head.headEnd...]))
    }

    /// Waits for the last DOWNLOAD of subscription set `version`'s bootstrap; its server version.
    static func bootstrapped(_ c: RawClient, set version: UInt64) async -> UInt64? {
        _ = await c.wait(seconds: 60) { received, _ in messages(received).contains { if case .download(_, _, _, version, _, true, _) = $0 { return true }; return false } }
        for m in messages(c) { if case .download(_, let v, _, version, _, true, _) = m { return v } }
        return nil
    }

    static func keys(in messages: [ProtocolMessage]) -> Set<FerryValue> {
        var keys: Set<FerryValue> = []
        for case .download(_, _, _, _, _, _, let changesets) in messages {
            for c in changesets { for i in (try? ChangesetCodec.decode(c.changeset).instructions) ?? [] { if case .create = i { keys.insert(i.key) } } }
        }
        return keys
    }

    @Test func aPendingSetSentAfterTheReflectedOneGetsWhatEntersIt() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            // An item written before the device's version.
            let writer = try await LiveServer.syncSocket(port: port, token: user.token)
            #expect(try await SyncTraffic.subscribe(writer))
            try await SyncTraffic.upload(writer, userId: user.id, items: 1, itemBytes: 10)
            #expect(await SlowConsumerTests.acknowledged(writer, through: 1))

            // The device: an empty view first (its version becomes the head), then a set the
            // item enters, whose bootstrap it receives but does not integrate (it drops).
            let first = try await LiveServer.syncSocket(port: port, token: user.token)
            try await first.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            try await first.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: [Subscription(name: "none", objectType: "Item", query: "complexity < 0")])))
            let version = try #require(await Self.bootstrapped(first, set: 1))
            guard case .ident(_, let ident, let salt)? = Self.messages(first).first(where: { if case .ident = $0 { return true }; return false }) else {
                Issue.record("no IDENT")
                return
            }
            let all = [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")]
            try await first.send(WireFormat.message(.query(session: 1, version: 2, subscriptions: all)))
            #expect(await Self.bootstrapped(first, set: 2) != nil)
            // The item, which entered the view with set 2.
            let item = try #require(Self.keys(in: Self.messages(first)).first, "set 2's bootstrap did not carry the item")
            await first.close()

            // It binds again from its older version and sends set 1, which its data reflects,
            // then set 2, still pending.
            let again = try await LiveServer.syncSocket(port: port, token: user.token)
            try await again.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: ident, clientFileSalt: salt, lastServerVersion: version)))
            try await again.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: [Subscription(name: "none", objectType: "Item", query: "complexity < 0")])))
            try await again.send(WireFormat.message(.query(session: 1, version: 2, subscriptions: all)))
            try await again.send(WireFormat.message(.mark(session: 1, request: 7)))
            #expect(await again.wait(seconds: 60) { received, _ in Self.messages(received).contains(.mark(session: 1, request: 7)) })
            #expect(Self.keys(in: Self.messages(again)).contains(item), "the item that entered the view before the device's version was not sent")
        }
    }

    /// The first set's bootstrap was cut: the device's data reflects no set (version 0, empty).
    @Test func aFirstSetCutShortIsSentAgainAfterTheEmptySet() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let writer = try await LiveServer.syncSocket(port: port, token: user.token)
            #expect(try await SyncTraffic.subscribe(writer))
            try await SyncTraffic.upload(writer, userId: user.id, items: 1, itemBytes: 10)
            #expect(await SlowConsumerTests.acknowledged(writer, through: 1))

            let all = [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")]
            let first = try await LiveServer.syncSocket(port: port, token: user.token)
            try await first.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            try await first.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: all)))
            #expect(await Self.bootstrapped(first, set: 1) != nil)
            let item = try #require(Self.keys(in: Self.messages(first)).first, "set 1's bootstrap did not carry the item")
            guard case .ident(_, let ident, let salt)? = Self.messages(first).first(where: { if case .ident = $0 { return true }; return false }) else {
                Issue.record("no IDENT")
                return
            }
            await first.close()

            let again = try await LiveServer.syncSocket(port: port, token: user.token)
            try await again.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: ident, clientFileSalt: salt, lastServerVersion: 0)))
            try await again.send(WireFormat.message(.query(session: 1, version: 0, subscriptions: [])))
            try await again.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: all)))
            try await again.send(WireFormat.message(.mark(session: 1, request: 7)))
            #expect(await again.wait(seconds: 60) { received, _ in Self.messages(received).contains(.mark(session: 1, request: 7)) })
            #expect(Self.keys(in: Self.messages(again)).contains(item))
            #expect(!Self.messages(again).contains { if case .error = $0 { return true }; return false })
        }
    }
}
