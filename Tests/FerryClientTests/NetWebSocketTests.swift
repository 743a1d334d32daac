import FerryClient
import FerryCore
import Testing

/// WebSocketClient against a real in-process Hummingbird server.
@Suite("Net: WebSocket client")
struct NetWebSocketTests {
    @Test func echoSmallAndLargeMessagesThenClose() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/echo")
            guard case .open = await socket.recorder.next() else {
                Issue.record("the WebSocket did not open")
                return
            }
            for message in [[UInt8](), [1, 2, 3], pattern(70_000, seed: 3), pattern((1 << 20) + 12_345, seed: 9)] {
                #expect(await socket.send(message))
                guard case .message(let echoed) = await socket.recorder.next() else {
                    Issue.record("no echo of a \(message.count)-byte message")
                    return
                }
                #expect(echoed == message)
            }
            await socket.close()
            guard case .closed(let error, _, _, let code) = await socket.recorder.next() else {
                Issue.record("no close")
                return
            }
            #expect(error == nil)
            #expect(code == 1000)
            #expect(await socket.send([1]) == false)
            await socket.release()
        }
    }

    @Test func fragmentedMessageFromTheServer() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            // The server writes 300 000 bytes in 64 KiB frames.
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/big")
            guard case .open = await socket.recorder.next() else {
                Issue.record("the WebSocket did not open")
                return
            }
            guard case .message(let message) = await socket.recorder.next() else {
                Issue.record("no message")
                return
            }
            #expect(message == [UInt8](repeating: 7, count: 300_000))
            await socket.close()
            guard case .closed = await socket.recorder.next() else {
                Issue.record("no close")
                return
            }
            await socket.release()
        }
    }

    @Test func messageLargerThanTheLimitClosesWithAnError() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/big", maxMessageSize: 100_000)
            guard case .open = await socket.recorder.next() else {
                Issue.record("the WebSocket did not open")
                return
            }
            guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
                Issue.record("no close")
                return
            }
            #expect(error?.message.contains("larger than") == true)
            await socket.release()
        }
    }

    @Test func serverCloseWithAnErrorCode() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/goaway")
            guard case .open = await socket.recorder.next() else {
                Issue.record("the WebSocket did not open")
                return
            }
            guard case .closed(let error, _, _, let code) = await socket.recorder.next() else {
                Issue.record("no close")
                return
            }
            #expect(code == 1011)
            #expect(error?.message.contains("1011") == true)
            await socket.release()
        }
    }

    /// Hummingbird answers every refused upgrade with an empty 400 (see NetWebSocketEdgeTests
    /// for a 401 with a body).
    @Test func refusedUpgradeReportsTheStatus() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/auth", headers: [("Authorization", "Bearer nope")])
            guard case .closed(let error, let status, let body, _) = await socket.recorder.next() else {
                Issue.record("expected a close without open")
                return
            }
            #expect(error != nil)
            #expect(status == 400)
            #expect(body.isEmpty)
            await socket.release()
        }
    }

    @Test func wrongSubprotocolFails() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/echo", subprotocol: "something-else")
            guard case .closed(let error, let status, _, _) = await socket.recorder.next() else {
                Issue.record("expected a close without open")
                return
            }
            #expect(error?.message.contains("subprotocol") == true)
            #expect(status == nil)
            await socket.release()
        }
    }

    @Test func connectionRefused() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(try closedPort())/ws/echo")
        guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
            Issue.record("expected a close without open")
            return
        }
        #expect(error?.code == .io)
        await socket.release()
    }

    @Test func closeWhileConnecting() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        try await NetTestServer.withServer { port in
            let socket = await TestWebSocket(loop: loop, url: "ws://127.0.0.1:\(port)/ws/echo", closeAtOnce: true)
            guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
                Issue.record("expected a close")
                return
            }
            #expect(error == nil)
            await socket.release()
        }
    }

    @Test func invalidURL() async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let socket = await TestWebSocket(loop: loop, url: "http://127.0.0.1/not-a-websocket")
        guard case .closed(let error, _, _, _) = await socket.recorder.next() else {
            Issue.record("expected a close")
            return
        }
        #expect(error?.code == .invalidArgument)
        await socket.release()
    }
}
