import FerryClient
import FerryCore
import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore

/// A hostile (or just raw) device: speaks docs/protocol.md directly over a WebSocket, so a
/// test can send what the real client never would (a chosen last server version, a huge
/// subscription set, a server-only message, another user's key).
final class RawSyncClient: @unchecked Sendable {
    /// What the server sent, in order.
    private let mailbox = Mailbox()
    private let outbound: WebSocketOutboundWriter

    private init(outbound: WebSocketOutboundWriter) { self.outbound = outbound }

    /// Sends one message, in frames of 16 KiB like the real client (the server's frame limit).
    func send(_ message: ProtocolMessage) async throws {
        let bytes = ProtocolCodec.encode(message)
        try await outbound.withBinaryMessageWriter { writer in
            var start = 0
            repeat {
                let end = min(start + (16 << 10), bytes.count)
                try await writer(ByteBuffer(bytes: bytes[start..<end]))
                start = end
            } while start < bytes.count
        }
    }

    /// The next message from the server: nil when the server closed the connection, or when
    /// nothing came within `seconds`.
    func next(seconds: Double = 30) async -> ProtocolMessage? { await mailbox.next(seconds: seconds) }

    /// Waits for the first message that `match` accepts (skipping others); nil on close or timeout.
    func next(seconds: Double = 30, where match: (ProtocolMessage) -> Bool) async -> ProtocolMessage? {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            let left = deadline.timeIntervalSinceNow
            guard left > 0, let m = await next(seconds: left) else { return nil }
            if match(m) { return m }
        }
    }

    /// Whether the server has closed the connection (waits up to `seconds` for it, skipping messages).
    func waitClosed(seconds: Double = 30) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while deadline.timeIntervalSinceNow > 0 {
            if await next(seconds: deadline.timeIntervalSinceNow) == nil { return await mailbox.isFinished }
        }
        return false
    }

    /// Connects with an access token and runs `body`; the connection ends with it.
    /// `features`: the `X-Ferry-Features` header to send (none by default, like an older client).
    static func connect(_ baseURL: String, token: String, appId: String = "item-app-seeds", features: String? = nil,
                        _ body: @escaping @Sendable (RawSyncClient) async throws -> Void) async throws {
        let url = baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/api/client/v2.0/app/\(appId)/realm-sync"
        var logger = Logger(label: "raw-sync-client")
        logger.logLevel = .critical
        var headers: HTTPFields = [.authorization: "Bearer \(token)", .secWebSocketProtocol: "ferry-sync.1"]
        if let features { headers[HTTPField.Name("X-Ferry-Features")!] = features }
        let failure = Arrival<Error?>()
        _ = try await WebSocketClient.connect(
            url: url,
            configuration: .init(maxFrameSize: 64 << 20, additionalHeaders: headers),
            logger: logger
        ) { inbound, outbound, _ in
            let client = RawSyncClient(outbound: outbound)
            let reader = Task {
                do {
                    for try await message in inbound.messages(maxSize: 64 << 20) {
                        guard case .binary(let buffer) = message, let m = try? ProtocolCodec.decode(Array(buffer: buffer)) else { continue }
                        await client.mailbox.put(m)
                    }
                } catch {}
                await client.mailbox.finish()
            }
            do { try await body(client); failure.deliver(nil) } catch { failure.deliver(error) }
            reader.cancel()
        }
        if let e = await failure.wait(seconds: 1), let e { throw e }
    }

    /// An access token of a new anonymous user, and the user's id.
    static func anonymousUser(_ baseURL: String) async throws -> (token: String, userId: String) {
        let dir = SyncTestServer.temporaryDirectory("raw")
        let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: baseURL, baseDirectory: dir, logLevel: .warn))
        defer { app.close() }
        let login = Arrival<Result<SyncUser, FerryError>>()
        app.login(.anonymous) { login.deliver($0) }
        guard let result = await login.wait(seconds: 60) else { throw FerryError(.timeout, "login timed out") }
        let user = try result.get()
        return (user.accessToken, user.id)
    }
}

/// The messages received, handed out one by one with a deadline.
private actor Mailbox {
    private var queue: [ProtocolMessage] = []
    private var waiter: CheckedContinuation<ProtocolMessage?, Never>?
    private(set) var isFinished = false
    private var generation = 0

    func put(_ m: ProtocolMessage) {
        if let w = waiter { waiter = nil; w.resume(returning: m) } else { queue.append(m) }
    }

    func finish() {
        isFinished = true
        waiter?.resume(returning: nil)
        waiter = nil
    }

    func next(seconds: Double) async -> ProtocolMessage? {
        if !queue.isEmpty { return queue.removeFirst() }
        if isFinished { return nil }
        generation += 1
        let mine = generation
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            await self?.expire(mine)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { waiter = $0 }
    }

    private func expire(_ g: Int) {
        guard g == generation, let w = waiter else { return }
        waiter = nil
        w.resume(returning: nil)
    }
}
