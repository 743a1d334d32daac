import FerryCore
import Logging

/// The frames waiting to go out on one WebSocket, in order. The hub appends without waiting
/// for the network; the connection's writer (`SyncSocket`) drains it.
///
/// The bytes waiting are bounded (`limitQueue(to:)`): a client that does not read as fast as
/// the server sends it has fallen behind. Past the bound the outbox drops what it holds, keeps
/// only ERROR 242 for the client (transient: its device reconnects and resumes from its last
/// server version) and closes. Not counted against the bound: the answer to the client's own
/// message while the hub works on it (`reply`), however large (a first download of a big view
/// is sent at once); instead the client's next message waits until the outbox is back under
/// the bound (`waitForRoom`), so a client that asks faster than it reads is slowed down, not
/// disconnected. What others' changes make the server send it counts in full. A frame is
/// always taken while nothing else waits: one large message alone is never falling behind.
final class ConnectionOutbox: Sendable {
    /// Why the outbox takes no more frames.
    enum Closure: Equatable, Sendable {
        case open
        /// Closed by the server; what was queued is still delivered.
        case finished
        /// The client fell behind: only the ERROR is delivered.
        case overflowed
        /// The socket is gone: nothing is delivered.
        case abandoned
    }

    static let defaultQueueLimit = 16 << 20

    let id: UInt64
    let userId: String
    let user: UserContext
    /// The server's logger with this connection's `connection_id` and `user_id`: every line
    /// about the connection carries them (what an operator filters a JSON log by).
    let logger: Logger
    /// Counts the DOWNLOAD messages sent (nil in tests of the outbox alone).
    let metrics: ServerMetrics?
    /// The client asked for WRITE_RULES after each BIND (SPEC F-PRECHECK); set by the socket
    /// before the first message is processed.
    var sendsWriteRules: Bool {
        get { writeRulesWanted.withLock { $0 } }
        set { writeRulesWanted.withLock { $0 = newValue } }
    }
    private let writeRulesWanted = LockedValue(false)

    private struct State {
        var frames: [[UInt8]] = []
        /// `frames` before this index are sent (compacted now and then).
        var head = 0
        var queuedBytes = 0
        var limit = ConnectionOutbox.defaultQueueLimit
        var closure = Closure.open
        /// Sends count as the answer to the client's message (`reply`).
        var replying = false
        /// Bytes of answers still queued: the bound applies to the rest.
        var replyBytes = 0
        var writer: CheckedContinuation<[UInt8]?, Never>?
        var closeWaiters: [CheckedContinuation<Void, Never>] = []
        /// Tasks waiting until at most `atMost` bytes (nil: the bound) are queued.
        var roomWaiters: [(atMost: Int?, waiter: CheckedContinuation<Void, Never>)] = []

        var hasRoom: Bool { fits(nil) }
        func fits(_ atMost: Int?) -> Bool { queuedBytes <= (atMost ?? limit) || closure != .open }

        /// The room waiters whose condition holds now, taken off the list.
        mutating func takeSatisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
            guard !roomWaiters.isEmpty else { return [] }
            var ready: [CheckedContinuation<Void, Never>] = []
            var waiting: [(atMost: Int?, waiter: CheckedContinuation<Void, Never>)] = []
            for w in roomWaiters {
                if fits(w.atMost) { ready.append(w.waiter) } else { waiting.append(w) }
            }
            roomWaiters = waiting
            return ready
        }

        var isEmpty: Bool { head == frames.count }

        mutating func pop() -> [UInt8] {
            let frame = frames[head]
            frames[head] = []
            head += 1
            queuedBytes -= frame.count
            replyBytes -= min(replyBytes, frame.count)
            if head == frames.count {
                frames.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024 && head * 2 >= frames.count {
                frames.removeFirst(head)
                head = 0
            }
            return frame
        }

        /// Closes with `closure`; the continuations to resume (outside the lock).
        mutating func close(_ closure: Closure) -> (writer: CheckedContinuation<[UInt8]?, Never>?, waiters: [CheckedContinuation<Void, Never>]) {
            self.closure = closure
            let waiters = closeWaiters + roomWaiters.map(\.waiter)
            closeWaiters = []
            roomWaiters = []
            // A waiting writer means nothing is queued: it learns the end now.
            let writer = self.writer
            self.writer = nil
            return (writer, waiters)
        }
    }

    private let state = LockedValue(State())
    /// Every connection's queued bytes together (`OutboxBudget`); nil in tests of the outbox alone.
    private let budget = LockedValue<OutboxBudget?>(nil)

    init(id: UInt64, user: UserContext, logger: Logger = Logger(label: "ferry-server", factory: { _ in SwiftLogNoOpLogHandler() }),
         metrics: ServerMetrics? = nil) {
        self.id = id
        self.userId = user.id
        self.user = user
        var logger = logger
        logger[metadataKey: "connection_id"] = "\(id)"
        logger[metadataKey: "user_id"] = "\(user.id)"
        self.logger = logger
        self.metrics = metrics
    }

    /// True once the connection is finished (closed by either side, or fallen behind): work
    /// done only for this connection can stop, nobody will read what it sends.
    var isClosed: Bool { state.withLock { $0.closure != .open } }

    var closure: Closure { state.withLock { $0.closure } }

    /// Bytes waiting to be written (not counting the frame being written).
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// Sets the bound on the bytes waiting (`ConnectionLimits.maxQueuedBytesPerConnection`).
    func limitQueue(to bytes: Int) { state.withLock { $0.limit = max(1, bytes) } }

    /// Counts this outbox's queue in `shared`, the bound on all connections together.
    func share(_ shared: OutboxBudget) {
        let queued = state.withLock { $0.queuedBytes }
        budget.withLock { $0 = shared }
        shared.join(self)
        shared.changed(by: queued)
    }

    deinit {
        let queued = state.withLock { $0.queuedBytes }
        budget.withLock { $0 }?.leave(id, holding: queued)
    }

    /// Tells the budget how much this outbox's queue changed.
    private func report(_ delta: Int) {
        guard delta != 0, let b = budget.withLock({ $0 }) else { return }
        b.changed(by: delta)
    }

    /// Drops what is queued, keeps only ERROR 242 with `message` for the client, and closes:
    /// the connection has fallen behind (its own bound, or the server's, `OutboxBudget`).
    func fallBehind(message: String) {
        var delta = 0
        let resumed = state.withLock { s -> (writer: CheckedContinuation<[UInt8]?, Never>?, waiters: [CheckedContinuation<Void, Never>]) in
            guard s.closure == .open else { return (nil, []) }
            let before = s.queuedBytes
            Self.keepOnlyFellBehind(&s, message: message)
            delta = s.queuedBytes - before
            return s.close(.overflowed)
        }
        report(delta)
        resume(resumed)
    }

    private static func keepOnlyFellBehind(_ s: inout State, message: String) {
        let error = ProtocolError(session: 0, code: ProtocolError.Code.fellBehind, message: message, tryAgain: true, action: .transient)
        let last = ProtocolCodec.encode(.error(error))
        s.frames = [last]
        s.head = 0
        s.queuedBytes = last.count
        s.replyBytes = 0
    }

    /// Queues `message`; dropped once the outbox is closed.
    func send(_ message: ProtocolMessage) {
        guard !isClosed else { return }
        let frame = ProtocolCodec.encode(message)
        var resumed: (writer: CheckedContinuation<[UInt8]?, Never>?, waiters: [CheckedContinuation<Void, Never>]) = (nil, [])
        var handOver: CheckedContinuation<[UInt8]?, Never>?
        var delta = 0
        state.withLock { s in
            guard s.closure == .open else { return }
            let before = s.queuedBytes
            defer { delta = s.queuedBytes - before }
            if let writer = s.writer {
                s.writer = nil
                handOver = writer
            } else if s.replying {
                s.frames.append(frame)
                s.queuedBytes += frame.count
                s.replyBytes += frame.count
            } else if !s.isEmpty && s.queuedBytes - s.replyBytes + frame.count > s.limit {
                Self.keepOnlyFellBehind(&s, message: "the connection fell behind: more than \(s.limit) bytes were waiting to be sent; reconnect to resume")
                resumed = s.close(.overflowed)
            } else {
                s.frames.append(frame)
                s.queuedBytes += frame.count
            }
        }
        handOver?.resume(returning: frame)
        report(delta)
        resume(resumed)
        if let metrics, case .download(_, _, _, _, _, _, let changesets) = message { metrics.downloadSent(changesets: changesets.count) }
    }

    /// Runs `work` (the hub on one of the client's messages) with what it sends counted as the
    /// answer to that message, not against the bound.
    func reply(_ work: () async -> Void) async {
        state.withLock { $0.replying = true }
        await work()
        state.withLock { $0.replying = false }
    }

    /// Returns once the bytes waiting are within the bound, or within `atMost` bytes when
    /// given (a streamed bootstrap keeps only a few messages queued), or the outbox is closed.
    func waitForRoom(atMost: Int? = nil) async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let ready = state.withLock { s in
                    if s.fits(atMost) { return true }
                    s.roomWaiters.append((atMost, c))
                    return false
                }
                if ready { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                defer { s.roomWaiters = [] }
                return s.roomWaiters.map(\.waiter)
            }
            for w in waiters { w.resume() }
        }
    }

    /// No more frames: what is queued is still delivered, then the writer ends.
    func finish() { close(.finished) }

    /// The socket is gone: what is queued is dropped and the writer ends.
    func abandon() { close(.abandoned) }

    /// The next frame to write, waiting for one; nil once the outbox is closed and drained.
    func next() async -> [UInt8]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<[UInt8]?, Never>) in
                var roomMade: [CheckedContinuation<Void, Never>] = []
                var delta = 0
                let ready: [UInt8]?? = state.withLock { s in
                    if !s.isEmpty {
                        let frame = s.pop()
                        delta = -frame.count
                        roomMade = s.takeSatisfiedWaiters()
                        return .some(frame)
                    }
                    if s.closure != .open { return .some(nil) }
                    s.writer = c
                    return .none
                }
                report(delta)
                for w in roomMade { w.resume() }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Returns once the outbox is closed (or the waiting task is cancelled).
    func waitUntilClosed() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let closed = state.withLock { s in
                    if s.closure != .open { return true }
                    s.closeWaiters.append(c)
                    return false
                }
                if closed { c.resume() }
            }
        } onCancel: {
            let waiters = state.withLock { s in
                let w = s.closeWaiters
                s.closeWaiters = []
                return w
            }
            for w in waiters { w.resume() }
        }
    }

    private func close(_ closure: Closure) {
        var delta = 0
        let resumed = state.withLock { s -> (writer: CheckedContinuation<[UInt8]?, Never>?, waiters: [CheckedContinuation<Void, Never>]) in
            switch (s.closure, closure) {
            case (.open, _):
                break
            case (.finished, .abandoned), (.overflowed, .abandoned):
                s.closure = .abandoned
            default:
                return (nil, [])
            }
            if closure == .abandoned {
                delta = -s.queuedBytes
                s.frames = []
                s.head = 0
                s.queuedBytes = 0
            }
            return s.close(closure)
        }
        report(delta)
        resume(resumed)
    }

    private func resume(_ r: (writer: CheckedContinuation<[UInt8]?, Never>?, waiters: [CheckedContinuation<Void, Never>])) {
        r.writer?.resume(returning: nil)
        for w in r.waiters { w.resume() }
    }
}
