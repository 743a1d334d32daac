import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 11, points 7 and 12: a sync WebSocket that sends no frame is closed after the sync
/// idle timeout (frames keep it open), and an unmasked client frame closes the connection
/// (RFC 6455 section 5.1) instead of being served.
@Suite("Server: sync WebSocket timeouts and framing")
struct WebSocketLimitsTests {
    static let ping = WireFormat.message(.ping(timestamp: 7))

    static func pongs(_ received: [UInt8]) -> Int {
        guard let head = WireFormat.response(received) else { return 0 }
        return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).count { $0 == .pong(timestamp: 7) }
    }

    static func closeCode(_ received: [UInt8]) -> UInt16? {
        guard let head = WireFormat.response(received) else { return nil }
        return WireFormat.closeCode(WireFormat.frames(received[head.headEnd...]))
    }

    @Test func aSilentSyncConnectionIsClosedAndAnActiveOneIsNot() async throws {
        // 6 s: a healthy client's frames 200 ms apart never leave that gap, even when the
        // whole suite loads both cores (at 2 s one did, in a CI dry run).
        let timeout = 6.0
        try await LiveServer.withServer(configure: { $0.connectionLimits.syncIdleTimeout = .seconds(6) }) { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let active = try await LiveServer.syncSocket(port: port, token: user.token)
            let silent = try await LiveServer.syncSocket(port: port, token: user.token)
            // A frame every 200 ms for 8 s: longer than the timeout, never silent for it,
            // unless this machine stalled the test itself that long (then the server was
            // right to close it, and only the silent connection is judged).
            var lastFrame = Date()
            var stalled = false
            func stalledSinceLastFrame() -> Bool { Date().timeIntervalSince(lastFrame) >= timeout / 2 }
            for n in 1...40 {
                if stalledSinceLastFrame() { stalled = true; break }
                do { try await active.send(Self.ping) } catch {
                    if stalledSinceLastFrame() { stalled = true; break }
                    throw error
                }
                lastFrame = Date()
                let answered = await active.wait(seconds: 30) { received, _ in Self.pongs(received) >= n }
                if !answered && stalledSinceLastFrame() { stalled = true; break }
                #expect(answered, "no pong for ping \(n)")
                try await Task.sleep(for: .milliseconds(200))
            }
            if stalled {
                print("WebSocketLimitsTests: the test itself stalled for half the idle timeout; the active connection is not judged")
            } else {
                #expect(!active.isClosed)
            }
            #expect(await silent.waitClosed(seconds: 30), "a sync connection without frames stays open")
            #expect(Self.closeCode(silent.received) == 1001)
            await active.close()
        }
    }

    @Test func anUnmaskedClientFrameClosesTheConnection() async throws {
        try await LiveServer.withServer { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let client = try await LiveServer.syncSocket(port: port, token: user.token)
            try await client.send(Self.ping)
            #expect(await client.wait(seconds: 30) { received, _ in Self.pongs(received) == 1 })
            let unmasked = WireFormat.frame(opcode: 0x2, ProtocolCodec.encode(.ping(timestamp: 7)), masked: false)
            try await client.send(unmasked)
            #expect(await client.waitClosed(seconds: 30), "the server keeps a connection that sent an unmasked frame")
            #expect(Self.pongs(client.received) == 1, "the server answered an unmasked frame")
            #expect(Self.closeCode(client.received) == 1002)
        }
    }
}
