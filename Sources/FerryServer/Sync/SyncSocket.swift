import FerryCore
import Logging
import NIOCore

/// One client's sync WebSocket on the server, as three tasks: the reader collects frames into
/// messages and queues them (a few at most), the processor hands them to the hub in order, the
/// writer drains the outbox. Reading apart from processing lets the server notice at once that
/// the client went away, even while the hub is still busy with an earlier message of it: the
/// outbox is then closed (`isClosed`, which long work for the connection checks) and the hub
/// forgets the connection without waiting for that work.
struct SyncSocket<Hub: SyncConnectionHub>: Sendable {
    /// Decoded messages waiting for the hub, at most; the reader stops reading past it.
    static var queuedMessages: Int { 4 }

    struct InboundMessage: Sendable {
        let message: ProtocolMessage
        /// What the message holds of the `InboundBudget` until it is processed.
        let bytes: Int
    }

    private enum Ending: Sendable {
        /// The client closed the connection or the socket failed.
        case clientLeft
        /// The server stopped reading: the client gets this ERROR, then the connection closes.
        case refused(SyncConnectionRefusal)
        /// The outbox closed: the hub ended the connection, or the client fell behind.
        case serverClosed
    }

    let hub: Hub
    let limits: ConnectionLimits
    let budget: InboundBudget
    /// Every connection's queued bytes together; nil: only each connection's own bound.
    let outboxBudget: OutboxBudget?
    /// The per-user limits, shared by every connection of the server.
    let quotas: UserQuotas
    let logger: Logger
    /// Where the connection's traffic and life are reported (nil in tests of the socket alone).
    let telemetry: SyncTelemetry?

    init(hub: Hub, limits: ConnectionLimits, budget: InboundBudget, outboxBudget: OutboxBudget? = nil, quotas: UserQuotas = UserQuotas(limits: SyncLimits()),
         logger: Logger, telemetry: SyncTelemetry? = nil) {
        self.outboxBudget = outboxBudget
        self.telemetry = telemetry
        self.hub = hub
        self.limits = limits
        self.budget = budget
        self.quotas = quotas
        self.logger = logger
    }

    /// Runs the connection until it ends: `frames` are the client's, `write` sends one message.
    /// `sdk`: the SDK/host version string the client sent (`X-Ferry-SDK`), if any;
    /// `sendsWriteRules`: the client understands WRITE_RULES (`X-Ferry-Features`).
    func run<Frames: AsyncSequence & Sendable>(user: UserContext, sdk: String? = nil, sendsWriteRules: Bool = false, frames: Frames,
                                               write: @escaping @Sendable (ByteBuffer) async throws -> Void) async
    where Frames.Element == InboundFrame {
        guard quotas.openConnection(user.id) else {
            let most = quotas.limits.maxConnectionsPerUser
            var logger = logger
            logger[metadataKey: "user_id"] = "\(user.id)"
            logger.warning("sync connection refused for user \(user.id): it has \(most) open, the most allowed (--max-connections-per-user)")
            let error = ProtocolError(session: 0, code: ProtocolError.Code.tooManyConnections,
                                      message: "the user has \(most) sync connections open, the most allowed; close one or try again later",
                                      tryAgain: true, action: .transient)
            // The connection is refused either way; a client already gone cannot be told why.
            try? await write(ByteBuffer(bytes: ProtocolCodec.encode(.error(error))))
            return
        }
        defer { quotas.closeConnection(user.id) }
        let outbox = await hub.openConnection(user: user)
        outbox.sendsWriteRules = sendsWriteRules
        outbox.limitQueue(to: limits.maxQueuedBytesPerConnection)
        if let outboxBudget { outbox.share(outboxBudget) }
        outbox.logger.info("sync connection \(outbox.id) opened for user \(user.id)\(sdk.map { " (\($0))" } ?? "")")
        telemetry?.connectionOpened(outbox, sdk: sdk)
        let held = HeldInboundBytes(budget: budget)
        let queue = MessageQueue<InboundMessage>(capacity: Self.queuedMessages)
        await withTaskGroup(of: Void.self) { writing in
            // Never cancelled: it ends once the outbox is closed and drained (so the client gets
            // the hub's last ERROR), or when the socket fails.
            writing.addTask { await drain(outbox, to: write) }
            let ending = await withTaskGroup(of: Ending?.self) { group -> Ending in
                group.addTask { await read(frames, into: queue, held: held, outbox: outbox) }
                group.addTask {
                    await process(queue, outbox: outbox, held: held)
                    return nil
                }
                group.addTask {
                    await outbox.waitUntilClosed()
                    return .serverClosed
                }
                var ending = Ending.serverClosed
                while let next = await group.next() {
                    if let next {
                        ending = next
                        break
                    }
                }
                // What the connection holds of the inbound budget goes back before the client
                // hears anything: a refused client's bytes are free when it reads its ERROR.
                queue.finish()
                held.releaseAll()
                switch ending {
                case .clientLeft: outbox.abandon()
                case .refused(let refusal):
                    outbox.send(.error(refusal.error))
                    outbox.finish()
                case .serverClosed: break
                }
                await hub.closeConnection(outbox)
                group.cancelAll()
                return ending
            }
            held.releaseAll()  // what the reader took while it was being stopped
            switch ending {
            case .clientLeft: telemetry?.connectionClosed(outbox, reason: "closed by the client")
            case .refused(let refusal): telemetry?.connectionClosed(outbox, reason: "refused: error \(refusal.error.code): \(refusal.error.message)")
            case .serverClosed where outbox.closure == .overflowed:
                telemetry?.connectionClosed(outbox, reason: "fell behind: more than \(limits.maxQueuedBytesPerConnection) bytes were waiting to be sent, or it was the furthest behind when every connection's queue together passed \(limits.maxQueuedBytesTotal) bytes")
            case .serverClosed: telemetry?.connectionClosed(outbox, reason: "closed by the server")
            }
            switch ending {
            case .refused(let refusal):
                outbox.logger.warning("sync connection \(outbox.id) refused: error \(refusal.error.code): \(refusal.error.message)")
            case .serverClosed where outbox.closure == .overflowed:
                outbox.logger.warning("sync connection \(outbox.id) fell behind (more than \(limits.maxQueuedBytesPerConnection) bytes waiting to be sent on it, or the furthest behind when all connections together passed \(limits.maxQueuedBytesTotal)); disconnected (error \(ProtocolError.Code.fellBehind))")
            case .clientLeft, .serverClosed:
                break
            }
        }
        outbox.logger.info("sync connection \(outbox.id) closed")
    }

    /// A PING is answered here, at once: the client's keep-alive must not wait for the hub
    /// (busy with this connection's earlier messages, or overloaded), or the client would take
    /// a busy server for a dead connection and reconnect (issue 13). The outbox takes frames
    /// from any task.
    private func read<Frames: AsyncSequence & Sendable>(_ frames: Frames, into queue: MessageQueue<InboundMessage>,
                                                        held: HeldInboundBytes, outbox: ConnectionOutbox) async -> Ending
    where Frames.Element == InboundFrame {
        var assembler = InboundMessageAssembler(maxMessageBytes: limits.maxMessageBytes, held: held)
        do {
            for try await frame in frames {
                // The user's byte rate: past it, this socket is not read for as long as the
                // excess costs (after this frame is handed on).
                let pause = quotas.takeInbound(frame.data.readableBytes, userId: outbox.userId)
                telemetry?.received(outbox, bytes: frame.data.readableBytes)
                if let (message, bytes) = try assembler.add(frame) {
                    if case .ping(let timestamp) = message {
                        held.release(bytes)
                        outbox.send(.pong(timestamp: timestamp))
                    } else if await !queue.push(InboundMessage(message: message, bytes: bytes)) {
                        break
                    }
                }
                if pause > .zero { try await Task.sleep(for: pause) }
            }
        } catch let refusal as SyncConnectionRefusal {
            return .refused(refusal)
        } catch {
            outbox.logger.info("sync connection \(outbox.id): \(error)")
        }
        return .clientLeft
    }

    /// Hands the client's messages to the hub in order, each once the outbox has room again:
    /// a client that asks for more than it reads waits for its answers to go out.
    ///
    /// While an upload is handled, an upload already queued behind it is decoded and merged
    /// (`SyncHub.prepareAhead`) beside it: a device sending a large backlog keeps two cores
    /// busy, one merging the next upload while the other commits this one. Only one message
    /// is taken ahead, only an upload, and it is still handled after this one, in order.
    private func process(_ queue: MessageQueue<InboundMessage>, outbox: ConnectionOutbox, held: HeldInboundBytes) async {
        var carried: (next: InboundMessage, prepared: PreparedUpload?)?
        while true {
            let current: InboundMessage
            var prepared: PreparedUpload?
            if let c = carried {
                (current, prepared, carried) = (c.next, c.prepared, nil)
            } else {
                guard let next = await queue.next() else { break }
                current = next
            }
            if case .query = current.message {
                // The user's subscription-set rate: past it, the QUERY waits its turn.
                let wait = quotas.takeSubscriptionSet(userId: outbox.userId)
                if wait > .zero { try? await Task.sleep(for: wait) }
            }
            await outbox.waitForRoom()
            if !outbox.isClosed {
                let ahead = Self.isUpload(current.message) ? queue.next(ifReady: { Self.isUpload($0.message) }) : nil
                // In a child task of its own, which ends with the message: a task keeps the
                // stack it grew to until it ends, and this loop lives as long as the connection.
                // Run here, the deepest message it ever handled (a QUERY's, about 9 KB) stayed
                // allocated for the connection's life: the largest share of an idle device's
                // server memory (issue 13, measured with heaptrack).
                async let handled: Void = outbox.reply { await hub.receive(current.message, prepared: prepared, from: outbox) }
                if let ahead, case .upload(let session, let changesets) = ahead.message {
                    async let preparing = hub.prepareAhead(session: session, changesets, from: outbox)
                    carried = (ahead, await preparing)
                }
                await handled
            }
            held.release(current.bytes)
        }
    }

    private static func isUpload(_ message: ProtocolMessage) -> Bool {
        if case .upload = message { true } else { false }
    }

    private func drain(_ outbox: ConnectionOutbox, to write: @Sendable (ByteBuffer) async throws -> Void) async {
        while let frame = await outbox.next() {
            telemetry?.sent(outbox, bytes: frame.count)
            do { try await write(ByteBuffer(bytes: frame)) } catch {
                outbox.abandon()
                return
            }
        }
    }
}
