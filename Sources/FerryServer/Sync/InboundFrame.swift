import HummingbirdWebSocket
import NIOCore

/// One data frame from a client, as `InboundMessageAssembler` needs it. Hummingbird's
/// `WebSocketDataFrame` cannot be made outside its library, so tests use this.
struct InboundFrame: Sendable {
    enum Kind: Sendable { case text, binary, continuation }
    var kind: Kind
    var data: ByteBuffer
    var fin: Bool
}

/// A sync WebSocket's frames as `InboundFrame`s.
struct InboundFrames: AsyncSequence, Sendable {
    let stream: WebSocketInboundStream

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: WebSocketInboundStream.AsyncIterator

        mutating func next() async throws -> InboundFrame? {
            guard let frame = try await base.next() else { return nil }
            let kind: InboundFrame.Kind = switch frame.opcode {
            case .text: .text
            case .binary: .binary
            case .continuation: .continuation
            }
            return InboundFrame(kind: kind, data: frame.data, fin: frame.fin)
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator()) }
}
