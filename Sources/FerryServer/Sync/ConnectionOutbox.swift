import FerryCore
import Synchronization

/// The frames waiting to go out on one WebSocket, in order. The hub appends without waiting
/// for the network; the connection's writer task drains it.
final class ConnectionOutbox: Sendable {
    let id: UInt64
    let userId: String
    let user: UserContext
    private let continuation: AsyncStream<[UInt8]>.Continuation
    let frames: AsyncStream<[UInt8]>
    private let closed = Mutex(false)

    init(id: UInt64, user: UserContext) {
        self.id = id
        self.userId = user.id
        self.user = user
        (frames, continuation) = AsyncStream<[UInt8]>.makeStream()
    }

    /// True once the connection is finished (closed by either side): work done only for this
    /// connection can stop, nobody will read what it sends.
    var isClosed: Bool { closed.withLock { $0 } }

    func send(_ message: ProtocolMessage) { continuation.yield(ProtocolCodec.encode(message)) }
    func finish() {
        closed.withLock { $0 = true }
        continuation.finish()
    }
}
