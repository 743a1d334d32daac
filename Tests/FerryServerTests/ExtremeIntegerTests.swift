import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 22, point 1: one message whose session id was 2^63 or more killed the server (its
/// telemetry converted the id to a signed 64-bit number before the hub checked it). Every
/// integer a client sends is range-checked where it is decoded (`ProtocolCodec.maxInteger`,
/// 2^63-1): a larger one ends the connection as malformed; up to it, every message is handled.
/// Each message kind, with every integer field at each edge, goes to a live server; a trap
/// would end this test process.
@Suite("Server: integers at the edges of 64 bits")
struct ExtremeIntegerTests {
    static let edges: [UInt64] = [0, UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max]

    /// A valid create of one item owned by `userId` (so an upload of it is merged, not refused).
    static func itemChangeset(userId: String) -> [UInt8] {
        let create = Instruction.create(table: "Item", key: .objectId(ObjectId.generate(secondsSinceEpoch: UInt32(Date().timeIntervalSince1970))), fields: [
            FieldValue(name: "ownerId", value: .string(userId)),
            FieldValue(name: "itemName", value: .string("edge")),
            FieldValue(name: "complexity", value: .int(1)),
        ])
        return ChangesetCodec.encode(Changeset(timestamp: Int64(Date().timeIntervalSince1970 * 1e9), instructions: [create]))
    }

    /// Every message kind, each integer field set to `v`: first the client's kinds, in a
    /// session bound with id `v`, then the server-only kinds, which a client may not send.
    static func messages(_ v: UInt64, userId: String) -> [(name: String, messages: [ProtocolMessage])] {
        let bindNew = ProtocolMessage.bind(session: v, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)
        return [
            ("BIND of a known-looking file", [.bind(session: v, database: "items", clientFileIdent: v, clientFileSalt: v, lastServerVersion: v)]),
            ("BIND of a new file", [.bind(session: v, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: v)]),
            ("QUERY", [bindNew, .query(session: v, version: v, subscriptions: [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")])]),
            ("UPLOAD", [bindNew, .upload(session: v, changesets: [
                UploadChangeset(clientVersion: v, lastIntegratedServerVersion: v, changeset: itemChangeset(userId: userId)),
            ])]),
            ("MARK", [bindNew, .mark(session: v, request: v)]),
            ("UNBIND", [bindNew, .unbind(session: v)]),
            ("UNBIND of an unbound session", [.unbind(session: v)]),
            ("UPLOAD to an unbound session", [.upload(session: v, changesets: [
                UploadChangeset(clientVersion: v, lastIntegratedServerVersion: v, changeset: itemChangeset(userId: userId)),
            ])]),
            ("MARK of an unbound session", [.mark(session: v, request: v)]),
            ("PING", [.ping(timestamp: v)]),
            ("IDENT", [.ident(session: v, clientFileIdent: v, clientFileSalt: v)]),
            ("DOWNLOAD", [.download(session: v, serverVersion: v, uploadAcknowledged: v, subscriptionVersion: v, downloadableBytes: v,
                                    isLastInBatch: true, changesets: [DownloadChangeset(serverVersion: v, originFileIdent: v, changeset: [])])]),
            ("ERROR", [.error(ProtocolError(session: v, code: 201, message: "x", tryAgain: false, action: .warning))]),
            ("PONG", [.pong(timestamp: v)]),
        ]
    }

    /// What a message is answered with: the server's messages, and whether it closed.
    struct Answer {
        var messages: [ProtocolMessage]
        var closed: Bool
    }

    /// Sends `messages` on a new sync connection, then binds a session of its own and asks for
    /// a MARK: the hub handles a connection's messages in order, so the MARK's answer comes
    /// after every earlier message was handled (a PING is answered before the hub sees it).
    static func send(_ messages: [ProtocolMessage], port: Int, token: String) async throws -> Answer {
        let client = try await LiveServer.syncSocket(port: port, token: token)
        let barrier: UInt64 = 4242
        // A refused message closes the connection: later sends may then fail, as they should.
        do {
            for m in messages { try await client.send(WireFormat.message(m)) }
            try await client.send(WireFormat.message(.bind(session: 77, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            try await client.send(WireFormat.message(.mark(session: 77, request: barrier)))
        } catch {
            #expect(client.isClosed || !client.channel.isActive, "a send failed on an open connection: \(error)")
        }
        let answered = await client.wait(seconds: 60) { received, closed in
            guard let head = WireFormat.response(received) else { return closed }
            return closed || WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains(.mark(session: 77, request: barrier))
        }
        #expect(answered, "neither the MARK's answer nor a close came")
        let head = try #require(WireFormat.response(client.received))
        let frames = WireFormat.frames(client.received[head.headEnd...])
        let answer = Answer(messages: WireFormat.messages(frames), closed: client.isClosed || WireFormat.closeCode(frames) != nil)
        await client.close()
        return answer
    }

    @Test func everyMessageKindWithEveryEdgeValueIsHandledOrRefused() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            for v in Self.edges {
                for (name, messages) in Self.messages(v, userId: user.id) {
                    let answer = try await Self.send(messages, port: port, token: user.token)
                    let serverOnly = ["IDENT", "DOWNLOAD", "ERROR", "PONG"].contains(name)
                    if v > ProtocolCodec.maxInteger || serverOnly {
                        // Refused: the connection ends, and its later messages are not handled.
                        #expect(answer.closed, "\(name) with \(v): the connection stayed open")
                        #expect(!answer.messages.contains(.mark(session: 77, request: 4242)), "\(name) with \(v): a message after it was handled")
                    } else {
                        #expect(!answer.closed, "\(name) with \(v): the connection was closed")
                        #expect(answer.messages.contains(.mark(session: 77, request: 4242)), "\(name) with \(v): the barrier was not answered")
                    }
                    // Every integer the server sends is in the protocol's range too.
                    for m in answer.messages { #expect(try ProtocolCodec.decode(ProtocolCodec.encode(m)) == m) }
                    if v == UInt64(Int64.max) && name == "MARK" {
                        #expect(answer.messages.contains(.mark(session: v, request: v)), "a MARK of session 2^63-1 was not answered")
                    }
                    if v == UInt64(Int64.max) && name == "UPLOAD" {
                        let acknowledged = answer.messages.contains {
                            if case .download(let s, _, let ack, _, _, _, _) = $0 { return s == v && ack == v }
                            return false
                        }
                        #expect(acknowledged, "an upload of client version 2^63-1 was not acknowledged")
                    }
                }
            }
            // And the server still syncs: a new device binds, subscribes and is answered.
            let device = try await LiveServer.syncSocket(port: port, token: user.token)
            #expect(try await SyncTraffic.subscribe(device))
        }
    }

    @Test func theDecoderRefusesIntegersAboveTheLimit() throws {
        for v in [UInt64(Int64.max) + 1, UInt64.max] {
            for (name, messages) in Self.messages(v, userId: "u") {
                let bytes = ProtocolCodec.encode(messages.last!)
                #expect(throws: FerryError.self, "\(name) with \(v) decoded") { try ProtocolCodec.decode(bytes) }
            }
        }
        for (name, messages) in Self.messages(UInt64(Int64.max), userId: "u") {
            #expect(try ProtocolCodec.decode(ProtocolCodec.encode(messages.last!)) == messages.last!, "\(name) at 2^63-1")
        }
    }
}
