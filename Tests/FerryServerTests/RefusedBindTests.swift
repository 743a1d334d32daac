import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 22, point 11: a client pipelines its QUERY and UPLOADs behind a BIND, and a device
/// that keeps writing sends an UPLOAD per commit until the server's answer reaches it. When the
/// BIND is refused (a client reset), the server answered every one of those with error 203,
/// each logged and recorded as an event in storage, and the reset's new BIND waited behind
/// them: 1,405 of them took over 30 s in a loaded run of the reset-while-writing test. Now the
/// session's messages are dropped until it binds again.
@Suite("Server: messages behind a refused BIND")
struct RefusedBindTests {
    static func messages(_ received: [UInt8]) -> [ProtocolMessage] {
        guard let head = WireFormat.response(received) else { return [] }
        return WireFormat.messages(WireFormat.frames(received[head.headEnd...]))
    }

    /// Waits until `message` arrived.
    static func arrived(_ c: RawClient, _ found: @escaping @Sendable (ProtocolMessage) -> Bool) async -> Bool {
        await c.wait(seconds: 60) { received, _ in messages(received).contains(where: found) }
    }

    @Test func messagesOfARefusedSessionAreDroppedUntilItBindsAgain() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let c = try await LiveServer.syncSocket(port: port, token: user.token)
            let set = [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")]
            // A file the server does not know: the BIND is refused with a client reset.
            try await c.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: 424_242, clientFileSalt: 7, lastServerVersion: 3)))
            for _ in 0..<20 {
                try await c.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: set)))
                try await c.send(WireFormat.message(.upload(session: 1, changesets: [])))
                try await c.send(WireFormat.message(.mark(session: 1, request: 1)))
            }
            // A barrier: another session's MARK is answered after everything above was handled.
            try await c.send(WireFormat.message(.bind(session: 2, database: "e", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            try await c.send(WireFormat.message(.query(session: 2, version: 1, subscriptions: set)))
            try await c.send(WireFormat.message(.mark(session: 2, request: 9)))
            #expect(await Self.arrived(c) { $0 == .mark(session: 2, request: 9) })
            let before = Self.messages(c.received)
            let refusals = before.filter { if case .error(let e) = $0, e.session == 1 { return true }; return false }
            #expect(refusals.count == 1, "\(refusals)")
            if case .error(let e)? = refusals.first { #expect(e.code == 208 && e.action == .clientReset, "\(e)") }
            #expect(!before.contains { if case .mark(1, _) = $0 { return true }; return false })

            // Bound again as a new file, the session is served as any other.
            try await c.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            try await c.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: set)))
            try await c.send(WireFormat.message(.mark(session: 1, request: 5)))
            #expect(await Self.arrived(c) { $0 == .mark(session: 1, request: 5) })
            #expect(Self.messages(c.received).contains { if case .ident(1, _, _) = $0 { return true }; return false })
            #expect(!Self.messages(c.received).contains { if case .error(let e) = $0 { return e.code == 203 }; return false })
            await c.close()
        }
    }
}
