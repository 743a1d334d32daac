import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A raw TCP client for tests that play a hostile or broken client: it sends exactly the bytes
/// given, reads only when told to (`pauseReading`), and waits for what the server sends or for
/// the server closing, each with a deadline.
final class RawClient: Sendable {
    let channel: any Channel
    let port: Int
    private let inbox: Inbox

    private init(channel: any Channel, port: Int, inbox: Inbox) {
        self.channel = channel
        self.port = port
        self.inbox = inbox
    }

    /// Every client still open, so a test server can close them before it stops (a server
    /// waits for its connections when it shuts down, also after a failed test).
    private static let open = Mutex<[ObjectIdentifier: RawClient]>([:])

    static func closeAll(port: Int) async {
        let clients = open.withLock { all in all.values.filter { $0.port == port } }
        for c in clients { await c.close() }
    }

    /// `receiveBuffer` (SO_RCVBUF, set before connecting) keeps the kernel from buffering much
    /// for a client that stops reading.
    static func connect(port: Int, receiveBuffer: Int? = nil) async throws -> RawClient {
        let inbox = Inbox()
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(InboxHandler(inbox)) }
            }
        if let receiveBuffer {
            bootstrap = bootstrap.channelOption(.socketOption(.so_rcvbuf), value: SocketOptionValue(receiveBuffer))
        }
        let channel = try await bootstrap.connect(host: "127.0.0.1", port: port).get()
        let client = RawClient(channel: channel, port: port, inbox: inbox)
        open.withLock { $0[ObjectIdentifier(client)] = client }
        return client
    }

    func send(_ bytes: [UInt8]) async throws { try await channel.writeAndFlush(ByteBuffer(bytes: bytes)) }
    func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    /// Stops reading the socket: what the server sends piles up in the kernel's buffers.
    func pauseReading() async throws { try await channel.setOption(.autoRead, value: false).get() }

    func resumeReading() async throws {
        try await channel.setOption(.autoRead, value: true).get()
        channel.read()
    }

    var received: [UInt8] { inbox.received }
    var isClosed: Bool { inbox.closed }

    /// Waits until `done` holds for what was received so far and whether the server closed;
    /// false if the deadline passes first, or the connection closed while it did not hold.
    func wait(seconds: Double, until done: @escaping @Sendable (_ received: [UInt8], _ closed: Bool) -> Bool) async -> Bool {
        let id = UUID()
        let inbox = self.inbox
        return await withTaskGroup(of: Bool.self) { group in
            group.addTask { await inbox.wait(id, done) }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                inbox.expire(id)
                return false
            }
            let first = await group.next() ?? false
            inbox.expire(id)
            group.cancelAll()
            return first
        }
    }

    /// Waits for the server to close the connection (reading what it sends meanwhile).
    func waitClosed(seconds: Double) async -> Bool { await wait(seconds: seconds) { _, closed in closed } }

    func close() async {
        try? await channel.close()
        _ = Self.open.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
    }

    final class Inbox: Sendable {
        private struct Waiter {
            let done: @Sendable ([UInt8], Bool) -> Bool
            let continuation: CheckedContinuation<Bool, Never>
        }

        private struct State {
            var received: [UInt8] = []
            var closed = false
            var waiters: [UUID: Waiter] = [:]
            var expired: Set<UUID> = []
        }

        private let state = Mutex(State())

        var received: [UInt8] { state.withLock { $0.received } }
        var closed: Bool { state.withLock { $0.closed } }

        func append(_ bytes: ByteBuffer) { update { $0.received += bytes.readableBytesView } }
        func close() { update { $0.closed = true } }

        func wait(_ id: UUID, _ done: @escaping @Sendable ([UInt8], Bool) -> Bool) async -> Bool {
            await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let answer: Bool? = state.withLock { s in
                    if s.expired.contains(id) { return false }
                    if done(s.received, s.closed) { return true }
                    if s.closed { return false }
                    s.waiters[id] = Waiter(done: done, continuation: c)
                    return nil
                }
                if let answer { c.resume(returning: answer) }
            }
        }

        func expire(_ id: UUID) {
            let waiter = state.withLock { s in
                s.expired.insert(id)
                return s.waiters.removeValue(forKey: id)
            }
            waiter?.continuation.resume(returning: false)
        }

        private func update(_ change: (inout State) -> Void) {
            let ready: [(CheckedContinuation<Bool, Never>, Bool)] = state.withLock { s in
                change(&s)
                var ready: [(CheckedContinuation<Bool, Never>, Bool)] = []
                for (id, w) in s.waiters {
                    if w.done(s.received, s.closed) {
                        ready.append((w.continuation, true))
                    } else if s.closed {
                        ready.append((w.continuation, false))
                    } else {
                        continue
                    }
                    s.waiters[id] = nil
                }
                return ready
            }
            for (c, answer) in ready { c.resume(returning: answer) }
        }
    }

    private final class InboxHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let inbox: Inbox

        init(_ inbox: Inbox) { self.inbox = inbox }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) { inbox.append(unwrapInboundIn(data)) }

        func channelInactive(context: ChannelHandlerContext) {
            inbox.close()
            context.fireChannelInactive()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case ChannelEvent.inputClosed = event { inbox.close() }
            context.fireUserInboundEventTriggered(event)
        }

        func errorCaught(context: ChannelHandlerContext, error: Error) { context.close(promise: nil) }
    }
}
