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
    let logger: Logger

    /// Runs the connection until it ends: `frames` are the client's, `write` sends one message.
    func run<Frames: AsyncSequence & Sendable>(user: UserContext, frames: Frames,
                                               write: @escaping @Sendable (ByteBuffer) async throws -> Void) async
    where Frames.Element == InboundFrame {
        let outbox = await hub.openConnection(user: user)
        outbox.limitQueue(to: limits.maxQueuedBytesPerConnection)
        logger.info("sync connection \(outbox.id) opened for user \(user.id)")
        let held = HeldInboundBytes(budget: budget)
        let queue = MessageQueue<InboundMessage>(capacity: Self.queuedMessages)
        await withTaskGroup(of: Void.self) { writing in
            // Never cancelled: it ends once the outbox is closed and drained (so the client gets
            // the hub's last ERROR), or when the socket fails.
            writing.addTask { await drain(outbox, to: write) }
            let ending = await withTaskGroup(of: Ending?.self) { group -> Ending in
                group.addTask { await read(frames, into: queue, held: held, connection: outbox.id) }
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
            case .refused(let refusal):
                logger.warning("sync connection \(outbox.id) refused: error \(refusal.error.code): \(refusal.error.message)")
            case .serverClosed where outbox.closure == .overflowed:
                logger.warning("sync connection \(outbox.id) fell behind: more than \(limits.maxQueuedBytesPerConnection) bytes were waiting to be sent; disconnected (error \(ConnectionOutbox.fellBehindCode))")
            case .clientLeft, .serverClosed:
                break
            }
        }
        logger.info("sync connection \(outbox.id) closed")
    }

    private func read<Frames: AsyncSequence & Sendable>(_ frames: Frames, into queue: MessageQueue<InboundMessage>,
                                                        held: HeldInboundBytes, connection: UInt64) async -> Ending
    where Frames.Element == InboundFrame {
        var assembler = InboundMessageAssembler(maxMessageBytes: limits.maxMessageBytes, held: held)
        do {
            for try await frame in frames {
                guard let (message, bytes) = try assembler.add(frame) else { continue }
                guard await queue.push(InboundMessage(message: message, bytes: bytes)) else { break }
            }
        } catch let refusal as SyncConnectionRefusal {
            return .refused(refusal)
        } catch {
            logger.info("sync connection \(connection): \(error)")
        }
        return .clientLeft
    }

    /// Hands the client's messages to the hub in order, each once the outbox has room again:
    /// a client that asks for more than it reads waits for its answers to go out.
    private func process(_ queue: MessageQueue<InboundMessage>, outbox: ConnectionOutbox, held: HeldInboundBytes) async {
        while let next = await queue.next() {
            await outbox.waitForRoom()
            if !outbox.isClosed { await outbox.reply { await hub.receive(next.message, from: outbox) } }
            held.release(next.bytes)
        }
    }

    private func drain(_ outbox: ConnectionOutbox, to write: @Sendable (ByteBuffer) async throws -> Void) async {
        while let frame = await outbox.next() {
            do { try await write(ByteBuffer(bytes: frame)) } catch {
                outbox.abandon()
                return
            }
        }
    }
}
