import Testing
@testable import FerryCore

@Suite("Sync protocol messages")
struct ProtocolCodecTests {
    static let messages: [ProtocolMessage] = [
        .bind(session: 1, database: "todo", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0),
        .bind(session: 2, database: "todo", clientFileIdent: 8, clientFileSalt: 9, lastServerVersion: 10, answeredThrough: 4),
        .ident(session: 1, clientFileIdent: 42, clientFileSalt: 0xdead_beef),
        .query(session: 1, version: 3, subscriptions: [Subscription(name: "simple-items", objectType: "Item", query: "complexity <= 4")]),
        .upload(session: 1, changesets: [UploadChangeset(clientVersion: 7, lastIntegratedServerVersion: 5, changeset: [1, 2, 3])]),
        .download(session: 1, serverVersion: 9, uploadAcknowledged: 7, subscriptionVersion: 3, downloadableBytes: 1 << 40,
                  isLastInBatch: true, changesets: [DownloadChangeset(serverVersion: 9, originFileIdent: 42, changeset: [])]),
        .mark(session: 1, request: 2),
        .unbind(session: 1),
        .error(ProtocolError(session: 1, code: 231, message: SyncErrorText.compensatingWriteMessage, tryAgain: true, action: .warning,
                             compensatingWrites: [.outsideView(objectType: "Item", primaryKey: .int(5))])),
        .ping(timestamp: 123), .pong(timestamp: 123),
        .writeRules(session: 1, rules: WriteRulesTests.onTheWire),
    ]

    /// BIND's `answeredThrough` is a trailing field: a BIND without it (what an older client
    /// sends, and what a client sends a server that does not offer `refusal-replay`) is the
    /// same bytes as before it existed, and decodes with nil.
    @Test func bindsAnsweredThroughIsOptionalAndTrailing() throws {
        let old: [UInt8] = [1, 3, 1, 0x64, 8, 9, 10]  // BIND session 3, "d", ident 8, salt 9, version 10
        let plain = ProtocolMessage.bind(session: 3, database: "d", clientFileIdent: 8, clientFileSalt: 9, lastServerVersion: 10)
        #expect(ProtocolCodec.encode(plain) == old)
        #expect(try ProtocolCodec.decode(old) == plain)
        #expect(try ProtocolCodec.decode(old + [5]) == .bind(session: 3, database: "d", clientFileIdent: 8, clientFileSalt: 9,
                                                            lastServerVersion: 10, answeredThrough: 5))
        // Range-checked as every integer of the protocol.
        #expect(throws: FerryError.self) { try ProtocolCodec.decode(old + [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) }
    }

    @Test func featuresAreReadFromAHeaderBounded() {
        #expect(ProtocolFeatures.parse(" write-rules ,refusal-replay\t, x") == ["write-rules", "refusal-replay", "x"])
        #expect(ProtocolFeatures.parse("").isEmpty)
        #expect(ProtocolFeatures.parse(String(repeating: "a,", count: 1_000)).count <= 16)
    }

    @Test func everyMessageRoundTrips() throws {
        for m in Self.messages { #expect(try ProtocolCodec.decode(ProtocolCodec.encode(m)) == m) }
    }

    @Test func hostileFramesAreErrors() {
        for m in Self.messages {
            let bytes = ProtocolCodec.encode(m)
            for n in 0..<bytes.count { _ = try? ProtocolCodec.decode(Array(bytes.prefix(n))) }
            for i in bytes.indices {
                var bad = bytes
                bad[i] ^= 0xff
                _ = try? ProtocolCodec.decode(bad)
            }
            // Two bytes: one more field would be a BIND's optional `answeredThrough`.
            #expect(throws: FerryError.self) { try ProtocolCodec.decode(bytes + [0, 0]) }
        }
        #expect(throws: FerryError.self) { try ProtocolCodec.decode([]) }
        #expect(throws: FerryError.self) { try ProtocolCodec.decode([99]) }
        // A count far beyond the frame is refused before anything is allocated for it.
        #expect(throws: FerryError.self) { try ProtocolCodec.decode([3, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]) }
    }
}
