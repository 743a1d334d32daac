import FerryClient
import FerryCore
import Testing

/// WebSocketClient against canned server bytes: refused upgrades, pings, protocol errors.
@Suite("Net: WebSocket edge cases")
struct NetWebSocketEdgeTests {
    @Test func refusedUpgradeSurfacesStatusAndBody() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        for endAfterResponse in [false, true] {
            let server = try CannedServer(endAfterResponse: endAfterResponse) { _ in
                Array(("HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
                       + (endAfterResponse ? "" : "Content-Length: 9\r\n") + "\r\nbad token").utf8)
            }
            defer { server.stop() }
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(server.port)/sync", headers: [("Authorization", "Bearer x")])
            guard case .closed(let error, let status, let body, _) = await socket.recorder.next() else {
                Issue.record("expected a close without open")
                return
            }
            #expect(error?.message.contains("401") == true)
            #expect(status == 401)
            #expect(body == Array("bad token".utf8))
            await socket.release()
        }
    }

    @Test func answersPingsAndEchoesTheClose() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let frames = WebSocketFrameEncoder.frame(.ping, payload: Array("hi".utf8)[...], maskingKey: nil)
            + WebSocketFrameEncoder.frame(.binary, payload: [1, 2, 3][...], maskingKey: nil)
            + WebSocketFrameEncoder.frame(.close, payload: WebSocketFrameEncoder.closePayload(code: 1000)[...], maskingKey: nil)
        let server = try CannedServer { head in CannedServer.upgrade(head, then: frames) }
        defer { server.stop() }
        let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(server.port)/sync")
        guard case .open = await socket.recorder.next() else {
            Issue.record("the WebSocket did not open")
            return
        }
        guard case .message(let message) = await socket.recorder.next() else {
            Issue.record("no message")
            return
        }
        #expect(message == [1, 2, 3])
        guard case .closed(let error, _, _, let code) = await socket.recorder.next() else {
            Issue.record("no close")
            return
        }
        #expect(error == nil)
        #expect(code == 1000)
        let sent = try #require(await server.afterResponse.wait())
        var decoder = WebSocketFrameDecoder(maxMessageSize: 1 << 20, expectsMaskedFrames: true)
        #expect(try decoder.feed(sent) == [.pong(Array("hi".utf8)), .close(code: 1000, reason: [])])
        await socket.release()
    }

    @Test func maskedFrameFromTheServerIsAProtocolError() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let frame = WebSocketFrameEncoder.frame(.binary, payload: [1][...], maskingKey: (1, 2, 3, 4))
        let server = try CannedServer { head in CannedServer.upgrade(head, then: frame) }
        defer { server.stop() }
        let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(server.port)/sync")
        guard case .open = await socket.recorder.next() else {
            Issue.record("the WebSocket did not open")
            return
        }
        guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
            Issue.record("no close")
            return
        }
        #expect(error?.message.contains("protocol error") == true)
        let sent = try #require(await server.afterResponse.wait())
        var decoder = WebSocketFrameDecoder(maxMessageSize: 1 << 20, expectsMaskedFrames: true)
        #expect(try decoder.feed(sent) == [.close(code: 1002, reason: [])])
        await socket.release()
    }

    @Test func badAcceptKeyFailsTheHandshake() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let server = try CannedServer { _ in
            Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: nope\r\nSec-WebSocket-Protocol: ferry-test\r\n\r\n".utf8)
        }
        defer { server.stop() }
        let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(server.port)/sync")
        guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
            Issue.record("expected a close without open")
            return
        }
        #expect(error?.message.contains("Sec-WebSocket-Accept") == true)
        await socket.release()
    }

    @Test func connectTimeout() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        // The server accepts but never answers the upgrade.
        let server = try CannedServer { _ in [] }
        defer { server.stop() }
        let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(server.port)/sync", connectTimeoutMs: 300)
        guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
            Issue.record("expected a close without open")
            return
        }
        #expect(error?.message.contains("timed out") == true)
        await socket.release()
    }
}
