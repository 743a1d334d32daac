import FerryClient
import FerryCore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Testing

/// A value that arrives later from another thread (a loop-thread callback), awaited with a
/// deadline instead of a sleep.
final class Arrival<Value: Sendable>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var value: Value?
    private var waiter: CheckedContinuation<Value?, Never>?

    func deliver(_ newValue: Value) {
        lock.lock()
        guard value == nil else { lock.unlock(); return }
        value = newValue
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume(returning: newValue)
    }

    /// The value, or nil if it did not arrive within `seconds`.
    func wait(seconds: Double = 20) async -> Value? {
        let timeout = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self?.expire()
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { continuation in
            lock.lock()
            if let value {
                lock.unlock()
                continuation.resume(returning: value)
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }

    private func expire() {
        lock.lock()
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume(returning: nil)
    }
}

/// Something only the loop thread touches, carried through test code that runs elsewhere.
final class LoopOwned<Value>: @unchecked Sendable {
    var value: Value?
}

/// The shared Ferry loop for one test.
struct TestLoop: Sendable {
    let loop: FerryClient.EventLoop

    init() throws { loop = try EventLoop.acquireShared() }

    func release() { EventLoop.releaseShared() }

    /// Runs `body` on the loop thread and waits for it.
    func run<T: Sendable>(_ body: @escaping @Sendable (FerryClient.EventLoop) -> T) async -> T? {
        let arrival = Arrival<T>()
        let loop = self.loop
        loop.post { arrival.deliver(body(loop)) }
        return await arrival.wait()
    }

    func send(_ request: FerryClient.HTTPRequest, tls: TLSOptions = TLSOptions(), timeoutMs: UInt64 = 20_000) async -> Result<FerryClient.HTTPResponse, FerryError>? {
        let arrival = Arrival<Result<FerryClient.HTTPResponse, FerryError>>()
        let loop = self.loop
        loop.post {
            HTTPClient.send(request, on: loop, tls: tls, timeoutMs: timeoutMs) { arrival.deliver($0) }
        }
        return await arrival.wait()
    }
}

/// Records what a WebSocketClient reports, for a test to take one event at a time.
final class WebSocketRecorder: WebSocketDelegate, @unchecked Sendable {
    enum Event: Sendable {
        case open
        case message([UInt8])
        case closed(FerryError?, handshakeStatus: Int?, handshakeBody: [UInt8], closeCode: UInt16?)
    }

    private let lock = ThreadLock()
    private var events: [Event] = []
    private var waiter: (CheckedContinuation<Event?, Never>, UUID)?

    func webSocketDidOpen(_ socket: WebSocketClient) { push(.open) }
    func webSocket(_ socket: WebSocketClient, didReceive message: [UInt8]) { push(.message(message)) }
    func webSocketDidClose(_ socket: WebSocketClient, error: FerryError?) {
        push(.closed(error, handshakeStatus: socket.handshakeStatus, handshakeBody: socket.handshakeBody, closeCode: socket.closeCode))
    }

    private func push(_ event: Event) {
        lock.lock()
        if let (waiter, _) = waiter {
            self.waiter = nil
            lock.unlock()
            waiter.resume(returning: event)
        } else {
            events.append(event)
            lock.unlock()
        }
    }

    /// The next event, or nil after `seconds` without one.
    func next(seconds: Double = 20) async -> Event? {
        let id = UUID()
        let timeout = Task { [weak self] in
            try? await Task.sleep(for: .seconds(seconds))
            self?.expire(id)
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { continuation in
            lock.lock()
            if !events.isEmpty {
                let event = events.removeFirst()
                lock.unlock()
                continuation.resume(returning: event)
            } else {
                waiter = (continuation, id)
                lock.unlock()
            }
        }
    }

    private func expire(_ id: UUID) {
        lock.lock()
        guard let (waiter, waiterID) = waiter, waiterID == id else { lock.unlock(); return }
        self.waiter = nil
        lock.unlock()
        waiter.resume(returning: nil)
    }
}

/// A WebSocketClient made, used and released on the loop thread, driven from a test.
struct TestWebSocket: Sendable {
    let loop: TestLoop
    let recorder = WebSocketRecorder()
    private let socket = LoopOwned<WebSocketClient>()

    init(loop: TestLoop, url: String, subprotocol: String = "ferry-test", headers: [(String, String)] = [],
         tls: TLSOptions = TLSOptions(), maxMessageSize: Int = 64 << 20, connectTimeoutMs: UInt64 = 30_000, closeAtOnce: Bool = false) async {
        self.loop = loop
        let recorder = self.recorder, socket = self.socket
        _ = await loop.run { loop in
            let client = WebSocketClient(loop: loop, url: url, subprotocol: subprotocol, headers: headers, tls: tls, maxMessageSize: maxMessageSize)
            client.delegate = recorder
            client.connectTimeoutMs = connectTimeoutMs
            socket.value = client
            client.connect()
            if closeAtOnce { client.close() }
        }
    }

    func send(_ message: [UInt8]) async -> Bool {
        let socket = self.socket
        return await loop.run { _ in socket.value?.send(message) ?? false } ?? false
    }

    func close() async {
        let socket = self.socket
        _ = await loop.run { _ in socket.value?.close() }
    }

    /// Drops the client on the loop thread.
    func release() async {
        let socket = self.socket
        _ = await loop.run { _ in socket.value = nil }
    }
}

/// An in-process Hummingbird server on 127.0.0.1 and a port the OS picks, with the routes the
/// network tests use.
enum NetTestServer {
    static let subprotocol = "ferry-test"

    static func withServer(_ body: (Int) async throws -> Void) async throws {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router(),
            server: .http1WebSocketUpgrade(configuration: .init(ws: .init(maxFrameSize: 1 << 16))) { head, _, _ in
                webSocketRoute(head)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portSink.yield(channel.localAddress?.port ?? 0)
                portSink.finish()
            },
            logger: Logger(label: "ferry-net-tests")
        )
        let server = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            Issue.record("the test server did not start")
            return
        }
        do {
            try await body(port)
        } catch {
            server.cancel()
            _ = await server.result
            throw error
        }
        server.cancel()
        _ = await server.result
    }

    static func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/hello") { _, _ in "hello" }
        router.post("/echo") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 16 << 20)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: body))
        }
        router.get("/chunked") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody { writer in
                for i in 0..<5 { try await writer.write(ByteBuffer(string: "part\(i);")) }
                try await writer.write(ByteBuffer(repeating: UInt8(ascii: "x"), count: 200_000))
                try await writer.finish(nil)
            })
        }
        router.get("/slow") { _, _ -> String in
            try await Task.sleep(for: .seconds(2))
            return "late"
        }
        router.get("/ws/auth") { _, _ -> Response in
            Response(status: .unauthorized, headers: [.contentType: "text/plain"], body: .init(byteBuffer: ByteBuffer(string: "bad token")))
        }
        return router
    }

    static func webSocketRoute(_ head: HTTPTypes.HTTPRequest) -> ShouldUpgradeResult<WebSocketDataHandler<HTTP1WebSocketUpgradeChannel.Context>> {
        let offered = (head.headerFields[.secWebSocketProtocol] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let headers: HTTPFields = offered.contains(subprotocol) ? [.secWebSocketProtocol: subprotocol] : [:]
        switch head.path {
        case "/ws/echo":
            return .upgrade(headers) { inbound, outbound, _ in
                for try await message in inbound.messages(maxSize: 16 << 20) {
                    switch message {
                    case .binary(let buffer): try await outbound.write(.binary(buffer))
                    case .text(let text): try await outbound.write(.text(text))
                    }
                }
            }
        case "/ws/goaway":
            return .upgrade(headers) { _, outbound, _ in
                try await outbound.close(.unexpectedServerError, reason: "going away")
            }
        case "/ws/big":
            return .upgrade(headers) { _, outbound, _ in
                try await outbound.write(.binary(ByteBuffer(repeating: 7, count: 300_000)))
            }
        default:
            return .dontUpgrade
        }
    }
}

/// A deterministic byte pattern that shows misplaced or lost bytes.
func pattern(_ count: Int, seed: UInt8 = 1) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed) &+ $0 >> 8) }
}
