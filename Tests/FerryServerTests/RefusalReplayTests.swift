import FerryCore
import FerryTestSupport
import Foundation
import Testing

/// Issue 25: the deterministic simulation found that a compensating write whose answer (the
/// revert and the ERROR 231) was lost with its connection was never told again: the device's
/// next BIND learned the acknowledgement, so it never sent the write again. The server now
/// keeps each client file's refusals (`RefusalLedger`) and sends those after the BIND's
/// `answeredThrough` again: the refused objects as they are (here: erases, since neither is in
/// the view), then the ERROR 231.
@Suite("Server: refusals sent again after a lost answer")
struct RefusalReplayTests {
    static func bind(_ d: OperationsDevice, ident: UInt64, salt: UInt64, answeredThrough: UInt64?) async throws {
        try await d.client.send(WireFormat.message(.bind(session: 1, database: "items", clientFileIdent: ident, clientFileSalt: salt,
                                                         lastServerVersion: 0, answeredThrough: answeredThrough)))
        // A barrier: the hub answers a session's MARK after whatever its BIND sends.
        try await d.client.send(WireFormat.message(.mark(session: 1, request: 99)))
        try await d.waitFor("the MARK after the BIND") { $0 == .mark(session: 1, request: 99) }
    }

    static func refusals(_ d: OperationsDevice) -> [ProtocolError] {
        d.messages.compactMap { if case .error(let e) = $0, e.code == ProtocolError.Code.compensatingWrite { e } else { nil } }
    }

    @Test func aRefusalIsSentAgainToADeviceThatHasNoAnswerForIt() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let first = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            // The server says it takes BIND's answered version.
            let head = String(decoding: first.client.received.prefix(WireFormat.response(first.client.received)?.headEnd ?? 0), as: UTF8.self)
            #expect(head.lowercased().contains("x-ferry-features: refusal-replay"), "\(head)")
            try await first.subscribe()
            try await first.waitFor("the IDENT") { if case .ident = $0 { true } else { false } }
            guard case .ident(_, let ident, let salt)? = first.messages.first(where: { if case .ident = $0 { true } else { false } }) else {
                Issue.record("no IDENT in \(first.messages)")
                return
            }
            let keys = try await first.uploadWithRejections(version: 1)
            let original = try #require(Self.refusals(first).first)
            #expect(original.compensatingWrites.count == 2)
            await first.client.close()

            // The device lost that answer: it has every answer through 0 only.
            let again = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            try await Self.bind(again, ident: ident, salt: salt, answeredThrough: 0)
            let messages = again.messages
            let repeated = Self.refusals(again)
            #expect(repeated.count == 1)
            #expect(repeated.first?.compensatingWrites == original.compensatingWrites)
            #expect(repeated.first?.session == 1 && repeated.first?.action == .warning)
            // Before it, a DOWNLOAD that acknowledges the upload and erases both refused objects.
            let errorAt = try #require(messages.firstIndex { if case .error = $0 { true } else { false } })
            let downloads = messages[..<errorAt].compactMap { m -> (UInt64, [Instruction])? in
                guard case .download(1, _, let ack, _, _, _, let changesets) = m else { return nil }
                return (ack, changesets.flatMap { (try? ChangesetCodec.decode($0.changeset).instructions) ?? [] })
            }
            #expect(downloads.count == 1 && downloads.first?.0 == 1)
            let erased = Set(downloads.flatMap(\.1).compactMap { i -> FerryValue? in if case .erase(_, let k) = i { k } else { nil } })
            #expect(erased == [.objectId(keys[1]), .objectId(keys[2])])
            await again.client.close()

            // A device that has that answer, and one that does not say (an older client), are not told again.
            for answered in [UInt64(1), nil] {
                let other = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
                try await Self.bind(other, ident: ident, salt: salt, answeredThrough: answered)
                #expect(Self.refusals(other).isEmpty, "answered through \(String(describing: answered))")
                #expect(!other.messages.contains { if case .error = $0 { true } else { false } })
                await other.client.close()
            }
            // The BIND that said it has the answer through 1 made the server forget that
            // refusal: even a bind that claims less is told nothing now.
            let late = try await OperationsDevice.connect(port: port, user: user, sdk: nil)
            try await Self.bind(late, ident: ident, salt: salt, answeredThrough: 0)
            #expect(Self.refusals(late).isEmpty)
            await late.client.close()
        }
    }
}
