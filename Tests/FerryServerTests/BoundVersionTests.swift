import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 22, point 8: a client's `bound_version` (the server version it says it has) is checked
/// against the head before it is stored. A device that claimed a version past the head got a
/// client reset, but the claim was stored first, and `ferry_oldest_needed_version` (what the
/// server must keep for its client files) showed the claimed 10^12.
@Suite("Server: a bound version past the head")
struct BoundVersionTests {
    @Test func aVersionPastTheHeadIsNotStored() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let first = try await LiveServer.syncSocket(port: port, token: user.token)
            try await first.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            let identified = await first.wait(seconds: 60) { received, _ in
                guard let head = WireFormat.response(received) else { return false }
                return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains { if case .ident = $0 { return true }; return false }
            }
            #expect(identified)
            let head = try #require(WireFormat.response(first.received))
            guard case .ident(_, let ident, let salt)? = WireFormat.messages(WireFormat.frames(first.received[head.headEnd...])).first(where: {
                if case .ident = $0 { return true }; return false
            }) else { Issue.record("no IDENT"); return }
            await first.close()

            let claimed: UInt64 = 1_000_000_000_000
            let again = try await LiveServer.syncSocket(port: port, token: user.token)
            try await again.send(WireFormat.message(.bind(session: 1, database: "d", clientFileIdent: ident, clientFileSalt: salt, lastServerVersion: claimed)))
            let refused = await again.wait(seconds: 60) { received, _ in
                guard let head = WireFormat.response(received) else { return false }
                return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains { if case .error(let e) = $0 { return e.code == 208 }; return false }
            }
            #expect(refused, "a version past the head was not refused")
            let metrics = try await MetricsTests.scrape(port: port)
            let oldest = try #require(MetricsTests.value(metrics, "ferry_oldest_needed_version"))
            let headVersion = try #require(MetricsTests.value(metrics, "ferry_history_head_version"))
            #expect(oldest <= headVersion, "the claimed version was stored: oldest needed \(oldest), head \(headVersion)")
        }
    }
}
