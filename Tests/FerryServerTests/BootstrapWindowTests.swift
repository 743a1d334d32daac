import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 22, point 11: a subscription set is recorded as what a device's data reflects just
/// before its bootstrap goes out. If the connection drops before the device integrated it,
/// the device binds again from its older version and sends the same set again; the server
/// used to take the set as reflected and send only what changed since that version, so
/// objects that entered the view earlier never reached the device. A set sent again now gets
/// the whole view.
///
/// Disabled: the window is still open (issue 22, point 11). This test reproduces it: the item
/// is missing. A fix tried (the server sends the whole view for a set sent again, and the
/// client sends a set again only when it is not complete) broke the randomized convergence and
/// session tests once the server had to catch a bound session up without a QUERY; it was
/// reverted. A version cannot decide it either: a device already at the head when it
/// subscribes gets a bootstrap at its own version.
@Suite("Server: a bootstrap the device did not integrate", .disabled("issue 22, point 11: the window is still open"))
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

    @Test func aSetSentAgainAfterADroppedBootstrapGetsTheWholeView() async throws {
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

            // It binds again from its older version and sends set 2 again.
            let again = try await LiveServer.syncSocket(port: port, token: user.token)
            try await again.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: ident, clientFileSalt: salt, lastServerVersion: version)))
            try await again.send(WireFormat.message(.query(session: 1, version: 2, subscriptions: all)))
            try await again.send(WireFormat.message(.mark(session: 1, request: 7)))
            #expect(await again.wait(seconds: 60) { received, _ in Self.messages(received).contains(.mark(session: 1, request: 7)) })
            #expect(Self.keys(in: Self.messages(again)).contains(item), "the item that entered the view before the device's version was not sent")
        }
    }
}
