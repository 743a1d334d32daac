import FerryCore
import NIOCore

/// Collects one connection's WebSocket frames into whole sync messages (one message per
/// WebSocket message, docs/protocol.md) and decodes them. Every byte is taken from the
/// server-wide `InboundBudget` before it is kept, and no message may pass `maxMessageBytes`:
/// a client cannot make the server hold more than that by sending a message slowly or never
/// finishing it. The bytes of a decoded message stay held until the processor is done with it.
struct InboundMessageAssembler {
    let maxMessageBytes: Int
    let held: HeldInboundBytes
    /// The frames of the message being collected (each at most Hummingbird's frame size).
    private var parts: [ByteBuffer] = []
    private var size = 0

    init(maxMessageBytes: Int, held: HeldInboundBytes) {
        self.maxMessageBytes = maxMessageBytes
        self.held = held
    }

    /// The decoded message and its size (to release once processed) when `frame` ends one.
    mutating func add(_ frame: InboundFrame) throws(SyncConnectionRefusal) -> (message: ProtocolMessage, bytes: Int)? {
        switch frame.kind {
        case .text:
            throw .violation("sync messages are binary frames")
        case .binary where !parts.isEmpty:
            throw .violation("a message began before the previous one ended")
        case .continuation where parts.isEmpty:
            throw .violation("a continuation frame without a message to continue")
        case .binary, .continuation:
            break
        }
        let count = frame.data.readableBytes
        guard size + count <= maxMessageBytes else {
            throw .violation("a message of more than \(maxMessageBytes) bytes (the largest a client may send)")
        }
        guard held.reserve(count) else { throw .overloaded(limit: held.limit) }
        parts.append(frame.data)
        size += count
        guard frame.fin else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        for part in parts { bytes.append(contentsOf: part.readableBytesView) }
        let total = size
        parts = []
        size = 0
        do {
            return (try ProtocolCodec.decode(bytes), total)
        } catch {
            held.release(total)
            throw .violation("malformed message: \(error)")
        }
    }
}
