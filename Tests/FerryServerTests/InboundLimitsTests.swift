import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 11, point 6 (c): what clients make the server hold of incoming messages is bounded,
/// per message and across all connections together: the connection that would go past a bound
/// gets an ERROR saying which and is closed; the others go on.
@Suite("Server: incoming message limits")
struct InboundLimitsTests {
    /// A QUERY of about `bytes` bytes for a session that is not bound (the hub answers 203).
    static func bigQuery(_ bytes: Int) -> [UInt8] {
        ProtocolCodec.encode(.query(session: 9, version: 1, subscriptions: [
            Subscription(name: String(repeating: "n", count: bytes), objectType: "Item", query: "complexity >= 0"),
        ]))
    }

    static func messages(_ client: RawClient) -> [ProtocolMessage] {
        guard let head = WireFormat.response(client.received) else { return [] }
        return WireFormat.messages(WireFormat.frames(client.received[head.headEnd...]))
    }

    static func errorCodes(_ received: [UInt8]) -> [Int32] {
        guard let head = WireFormat.response(received) else { return [] }
        return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).compactMap {
            if case .error(let e) = $0 { e.code } else { nil }
        }
    }

    static func closeCode(_ received: [UInt8]) -> UInt16? {
        guard let head = WireFormat.response(received) else { return nil }
        return WireFormat.closeCode(WireFormat.frames(received[head.headEnd...]))
    }

    @Test func bytesHeldForIncompleteMessagesAreCappedAcrossConnections() async throws {
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.maxInboundBytes = 64 << 10
            $0.connectionLimits.maxMessageBytes = 48 << 10
        }) { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let parked = try await LiveServer.syncSocket(port: port, token: user.token)
            let other = try await LiveServer.syncSocket(port: port, token: user.token)
            let query = Self.bigQuery(40 << 10)
            let split = 32 << 10
            // The first 32 KiB of a message, then a WebSocket ping: its pong proves the server
            // has read (and holds) those bytes.
            try await parked.send(WireFormat.fragments(Array(query[..<split]), finishing: false))
            try await parked.send(WireFormat.frame(opcode: 0x9, Array("held".utf8)))
            #expect(await parked.wait(seconds: 30) { received, _ in
                guard let head = WireFormat.response(received) else { return false }
                return WireFormat.frames(received[head.headEnd...]).contains { $0.opcode == 0xA }
            })
            // 32 KiB held + 40 KiB > 64 KiB: the second connection is refused.
            try await other.send(WireFormat.fragments(query))
            #expect(await other.wait(seconds: 30) { received, _ in Self.errorCodes(received).contains(241) && Self.closeCode(received) != nil },
                    "the server holds more than its bound of incoming bytes")
            #expect(Self.errorCodes(other.received) == [241])
            // The parked message completes within the bound and is processed (203: session 9 is not bound).
            try await parked.send(WireFormat.frame(opcode: 0x0, Array(query[split...])))
            #expect(await parked.wait(seconds: 30) { received, _ in Self.errorCodes(received).contains(203) })
            #expect(!Self.errorCodes(parked.received).contains(241))
            await parked.close()
        }
    }

    @Test func aMessageOverTheMaximumIsRefused() async throws {
        try await LiveServer.withServer(configure: { $0.connectionLimits.maxMessageBytes = 48 << 10 }) { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let client = try await LiveServer.syncSocket(port: port, token: user.token)
            try await client.send(WireFormat.fragments(Self.bigQuery(50 << 10)))
            #expect(await client.wait(seconds: 30) { received, _ in Self.errorCodes(received).contains(201) && Self.closeCode(received) != nil },
                    "the server takes a message larger than its maximum")
            #expect(Self.messages(client).contains {
                if case .error(let e) = $0 { e.message.contains("more than 49152 bytes") } else { false }
            })
        }
    }
}
