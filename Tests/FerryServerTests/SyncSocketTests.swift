import FerryCore
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
@testable import FerryServer

/// The connection layer without a network: a client that goes away is noticed while the hub
/// still works on its previous message (issue 11, point 6), and the outbox's bound.
@Suite("Server: sync connection internals")
struct SyncSocketTests {
    /// A hub whose `receive` waits until the test releases it, as a long subscription
    /// evaluation would; it records when the connection is closed.
    actor SlowHub: SyncConnectionHub {
        let receiving = Arrival()
        let closed = Arrival()
        private var release: CheckedContinuation<Void, Never>?
        private var released = false

        func openConnection(user: UserContext) -> ConnectionOutbox { ConnectionOutbox(id: 1, user: user) }

        func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async {
            receiving.arrive()
            if released { return }
            await withCheckedContinuation { release = $0 }
        }

        func closeConnection(_ outbox: ConnectionOutbox) {
            outbox.finish()
            closed.arrive()
        }

        func finishReceiving() {
            released = true
            release?.resume()
            release = nil
        }
    }

    /// Something that happens once, waited for with a deadline.
    final class Arrival: Sendable {
        private let stream: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation

        init() { (stream, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1)) }

        func arrive() { continuation.yield() }

        func wait(seconds: Double) async -> Bool {
            let stream = self.stream
            return await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await _ in stream { return true }
                    return false
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(seconds))
                    return false
                }
                let first = await group.next() ?? false
                group.cancelAll()
                return first
            }
        }
    }

    static func frame(_ message: ProtocolMessage) -> InboundFrame {
        InboundFrame(kind: .binary, data: ByteBuffer(bytes: ProtocolCodec.encode(message)), fin: true)
    }

    @Test func aClientThatLeavesIsNoticedWhileItsPreviousMessageIsProcessed() async throws {
        let hub = SlowHub()
        let socket = SyncSocket(hub: hub, limits: ConnectionLimits(), budget: InboundBudget(limit: 1 << 20), logger: Self.quiet)
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let run = Task {
            await socket.run(user: UserContext(id: "u"), frames: frames) { _ in }
        }
        client.yield(Self.frame(.mark(session: 1, request: 1)))
        #expect(await hub.receiving.wait(seconds: 30))
        // The client goes away while the hub is still busy with its MARK.
        client.finish()
        #expect(await hub.closed.wait(seconds: 30), "the connection is closed only after the hub is done with the previous message")
        await hub.finishReceiving()
        await run.value
    }

    /// Issue 13: under overload the hub is slow, and a PING queued behind it went unanswered
    /// until the client took the connection for dead. The connection answers it itself.
    @Test func aPingIsAnsweredWhileTheHubIsBusy() async throws {
        let hub = SlowHub()
        let socket = SyncSocket(hub: hub, limits: ConnectionLimits(), budget: InboundBudget(limit: 1 << 20), logger: Self.quiet)
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let pong = Arrival()
        let run = Task {
            await socket.run(user: UserContext(id: "u"), frames: frames) { bytes in
                if case .pong(7)? = try? ProtocolCodec.decode(Array(bytes.readableBytesView)) { pong.arrive() }
            }
        }
        client.yield(Self.frame(.mark(session: 1, request: 1)))
        #expect(await hub.receiving.wait(seconds: 30))
        // The hub is busy with the MARK (and stays so until released).
        client.yield(Self.frame(.ping(timestamp: 7)))
        #expect(await pong.wait(seconds: 30), "no PONG while the hub was busy")
        await hub.finishReceiving()
        client.finish()
        await run.value
    }

    /// A hub that answers every message with `replyFrames` ERRORs of about 400 bytes, and
    /// records how many bytes waited in the outbox when each message came in.
    actor ReplyingHub: SyncConnectionHub {
        let replyFrames: Int
        let firstReceived = Arrival()
        private(set) var queuedAtArrival: [Int] = []
        let allReceived = Arrival()
        let expected: Int

        init(replyFrames: Int, expected: Int) {
            self.replyFrames = replyFrames
            self.expected = expected
        }

        func openConnection(user: UserContext) -> ConnectionOutbox { ConnectionOutbox(id: 1, user: user) }

        func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) {
            queuedAtArrival.append(outbox.queuedBytes)
            for _ in 0..<replyFrames {
                outbox.send(.error(ProtocolError(session: 1, code: 226, message: String(repeating: "r", count: 400), tryAgain: false, action: .warning)))
            }
            if queuedAtArrival.count == 1 { firstReceived.arrive() }
            if queuedAtArrival.count == expected { allReceived.arrive() }
        }

        func closeConnection(_ outbox: ConnectionOutbox) { outbox.finish() }
    }

    /// Closed until opened, then open for good.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

        func pass() async {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let open = state.withLock { s in
                    if !s.open { s.waiters.append(c) }
                    return s.open
                }
                if open { c.resume() }
            }
        }

        func open() {
            let waiters = state.withLock { s in
                s.open = true
                defer { s.waiters = [] }
                return s.waiters
            }
            for w in waiters { w.resume() }
        }
    }

    /// Issue 11, point 6 (b): a client that asks again and again (a subscription toggled)
    /// before it has read the answers is slowed down: its next message waits until its outbox
    /// is back under the bound. Its own answers never count as falling behind.
    @Test func aClientThatAsksFasterThanItReadsWaitsForItsAnswers() async throws {
        let hub = ReplyingHub(replyFrames: 5, expected: 3)
        let socket = SyncSocket(hub: hub, limits: ConnectionLimits(maxQueuedBytesPerConnection: 1000),
                                budget: InboundBudget(limit: 1 << 20), logger: Self.quiet)
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let gate = Gate()
        let run = Task {
            await socket.run(user: UserContext(id: "u"), frames: frames) { _ in await gate.pass() }
        }
        for n in 1...3 { client.yield(Self.frame(.mark(session: 1, request: UInt64(n)))) }
        #expect(await hub.firstReceived.wait(seconds: 30))
        gate.open()
        #expect(await hub.allReceived.wait(seconds: 30))
        let queued = await hub.queuedAtArrival
        #expect(queued.count == 3)
        #expect(queued.dropFirst().allSatisfy { $0 <= 1000 }, "a message was processed while \(queued) bytes waited")
        client.finish()
        await run.value
    }

    static var quiet: Logger {
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        return logger
    }

    @Test func anOutboxOverItsBoundKeepsOnlyTheError() async {
        let outbox = ConnectionOutbox(id: 1, user: UserContext(id: "u"))
        outbox.limitQueue(to: 1000)
        let big = ProtocolMessage.error(ProtocolError(session: 1, code: 226, message: String(repeating: "x", count: 300), tryAgain: false, action: .warning))
        for _ in 0..<3 { outbox.send(big) }
        #expect(!outbox.isClosed)
        #expect(outbox.queuedBytes > 900)
        outbox.send(big)
        #expect(outbox.isClosed)
        #expect(outbox.closure == .overflowed)
        #expect(outbox.queuedBytes < 200)
        outbox.send(big)
        let last = await outbox.next()
        guard case .error(let error)? = last.flatMap({ try? ProtocolCodec.decode($0) }) else {
            Issue.record("the outbox does not end with an ERROR")
            return
        }
        #expect(error.code == 242)
        #expect(await outbox.next() == nil)
    }

    @Test func oneLargeMessageIsNotFallingBehind() async {
        let outbox = ConnectionOutbox(id: 1, user: UserContext(id: "u"))
        outbox.limitQueue(to: 100)
        outbox.send(.error(ProtocolError(session: 1, code: 226, message: String(repeating: "x", count: 300), tryAgain: false, action: .warning)))
        #expect(!outbox.isClosed)
        outbox.finish()
        #expect(await outbox.next() != nil)
        #expect(await outbox.next() == nil)
    }

    @Test func scannersFollowHeadsAndFramesAcrossReads() {
        var head = RequestHeadScanner()
        #expect(head.scan(Array("\r\n\r\n".utf8)) == nil)
        #expect(head.scan(Array("GET / HTTP/1.1\r\nHost: a\r".utf8)) == nil)
        #expect(head.scan(Array("\n\r\nrest".utf8)) == 3)

        var frames = WebSocketFrameScanner()
        let masked = WireFormat.frame(opcode: 0x2, [UInt8](repeating: 0, count: 300))
        #expect(frames.scan(masked[..<5]) == .init(unmasked: false, completedFrames: 0))
        #expect(frames.scan(masked[5...]) == .init(unmasked: false, completedFrames: 1))
        let unmasked = WireFormat.frame(opcode: 0x2, [1, 2], masked: false)
        #expect(frames.scan(unmasked) == .init(unmasked: true, completedFrames: 1))
    }

    /// A hub that records the order of `prepareAhead` and `receive` calls for uploads (by
    /// the client version of their first changeset): it holds the first upload until the test
    /// releases it, and the second until the third has been prepared.
    actor AheadHub: SyncConnectionHub {
        private(set) var events: [String] = []
        let firstArrived = Arrival()
        let thirdPrepared = Arrival()
        let fourthDone = Arrival()
        private var release: CheckedContinuation<Void, Never>?
        private var released = false

        func openConnection(user: UserContext) -> ConnectionOutbox { ConnectionOutbox(id: 1, user: user) }
        func closeConnection(_ outbox: ConnectionOutbox) { outbox.finish() }

        func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async {
            await receive(message, prepared: nil, from: outbox)
        }

        func receive(_ message: ProtocolMessage, prepared: PreparedUpload?, from outbox: ConnectionOutbox) async {
            guard case .upload(_, let changesets) = message, let v = changesets.first?.clientVersion else {
                events.append("receive \(message)")
                return
            }
            events.append("receive \(v)\(prepared == nil ? "" : " prepared")")
            if v == 1 {
                firstArrived.arrive()
                if !released { await withCheckedContinuation { release = $0 } }
            }
            // The third upload is prepared while this one is handled: waiting for it here
            // would never end if the socket prepared only between messages.
            if v == 2 { _ = await thirdPrepared.wait(seconds: 30) }
            events.append("done \(v)")
            if v == 4 { fourthDone.arrive() }
        }

        func prepareAhead(session: UInt64, _ changesets: [UploadChangeset], from outbox: ConnectionOutbox) async -> PreparedUpload? {
            let v = changesets.first?.clientVersion ?? 0
            events.append("prepare \(v)")
            if v == 3 { thirdPrepared.arrive() }
            return PreparedUpload(decoded: [], arrived: .now)
        }

        func releaseFirst() {
            released = true
            release?.resume()
            release = nil
        }
    }

    /// Issue 23: an upload queued behind the one being handled is prepared beside it, and still
    /// handled after it; only uploads are taken ahead, one at a time.
    @Test func theNextQueuedUploadIsPreparedWhileTheCurrentOneIsHandled() async throws {
        let hub = AheadHub()
        let socket = SyncSocket(hub: hub, limits: ConnectionLimits(), budget: InboundBudget(limit: 1 << 20), logger: Self.quiet)
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let pong = Arrival()
        let run = Task {
            await socket.run(user: UserContext(id: "u"), frames: frames) { bytes in
                if case .pong(5)? = try? ProtocolCodec.decode(Array(bytes.readableBytesView)) { pong.arrive() }
            }
        }
        func upload(_ v: UInt64) -> InboundFrame {
            Self.frame(.upload(session: 1, changesets: [UploadChangeset(clientVersion: v, lastIntegratedServerVersion: 0, changeset: [])]))
        }
        client.yield(upload(1))
        #expect(await hub.firstArrived.wait(seconds: 30))
        for v: UInt64 in 2...3 { client.yield(upload(v)) }
        client.yield(Self.frame(.mark(session: 1, request: 1)))
        client.yield(upload(4))
        // The connection answers a PING after queueing everything before it.
        client.yield(Self.frame(.ping(timestamp: 5)))
        #expect(await pong.wait(seconds: 30))
        await hub.releaseFirst()
        #expect(await hub.fourthDone.wait(seconds: 30))
        client.finish()
        await run.value
        // The first was handled before the others were queued: nothing ahead of it. The third
        // is prepared while the second is handled; the MARK is not taken ahead, so neither is
        // the upload behind it.
        let events = await hub.events
        #expect(events.filter { $0 != "prepare 3" } == ["receive 1", "done 1", "receive 2", "done 2", "receive 3 prepared", "done 3",
                                                       "receive \(ProtocolMessage.mark(session: 1, request: 1))", "receive 4", "done 4"], "\(events)")
        // Beside the second (the two run concurrently, in either order).
        let prepared = events.firstIndex(of: "prepare 3") ?? -1
        #expect(events.filter { $0.hasPrefix("prepare") }.count == 1 && prepared > events.firstIndex(of: "done 1")! && prepared < events.firstIndex(of: "done 2")!,
                "\(events)")
    }
}
