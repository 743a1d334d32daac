import FerryCore
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing
@testable import FerryServer

/// Issue 13, per-user limits: the accounting itself on a clock the test moves, and where a
/// connection applies it (`SyncSocket` with a stand-in hub).
@Suite("Server: per-user limits")
struct UserQuotasTests {
    /// Seconds the test sets.
    final class TestClock: Sendable {
        private let now = Mutex(0.0)
        func advance(_ seconds: Double) { now.withLock { $0 += seconds } }
        var read: @Sendable () -> Double { { [self] in now.withLock { $0 } } }
    }

    @Test func connectionsOfOneUserAreCountedAndBounded() {
        var limits = SyncLimits()
        limits.maxConnectionsPerUser = 2
        let quotas = UserQuotas(limits: limits)
        #expect(quotas.openConnection("a"))
        #expect(quotas.openConnection("a"))
        #expect(!quotas.openConnection("a"), "a third connection of the same user")
        #expect(quotas.openConnection("b"), "another user is not limited by the first")
        quotas.closeConnection("a")
        #expect(quotas.openConnection("a"))
        #expect(quotas.connections(of: "a") == 2)
    }

    @Test func bytesPastTheRateCostAPauseAsLongAsTheExcess() {
        let clock = TestClock()
        var limits = SyncLimits()
        limits.inboundBytesPerSecondPerUser = 1000
        let quotas = UserQuotas(limits: limits, clock: clock.read)
        #expect(quotas.takeInbound(1000, userId: "a") == .zero, "the burst")
        #expect(quotas.takeInbound(500, userId: "a") == .milliseconds(500))
        #expect(quotas.takeInbound(0, userId: "b") == .zero, "each user has a bucket of its own")
        clock.advance(0.5)
        #expect(quotas.takeInbound(0, userId: "a") == .zero, "the excess is paid after its time")
        // One message larger than the burst is taken, and followed by a pause as long.
        #expect(quotas.takeInbound(3000, userId: "a") == .seconds(3))
    }

    @Test func reconnectingDoesNotResetWhatAUserOwes() {
        let clock = TestClock()
        var limits = SyncLimits()
        limits.subscriptionSetsPerMinutePerUser = 2
        let quotas = UserQuotas(limits: limits, clock: clock.read)
        #expect(quotas.openConnection("a"))
        #expect(quotas.takeSubscriptionSet(userId: "a") == .zero)
        #expect(quotas.takeSubscriptionSet(userId: "a") == .zero)
        #expect(quotas.takeSubscriptionSet(userId: "a") == .seconds(30))
        quotas.closeConnection("a")
        #expect(quotas.openConnection("a"))
        #expect(quotas.takeSubscriptionSet(userId: "a") == .seconds(60), "the debt outlived the connection")
        clock.advance(60)
        #expect(quotas.takeSubscriptionSet(userId: "a") == .seconds(30))
    }

    /// A hub that counts the messages it receives.
    actor RecordingHub: SyncConnectionHub {
        private var received = 0
        private let counts: AsyncStream<Int>
        private let counted: AsyncStream<Int>.Continuation

        init() { (counts, counted) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1)) }

        func openConnection(user: UserContext) -> ConnectionOutbox { ConnectionOutbox(id: 1, user: user) }
        func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) {
            received += 1
            counted.yield(received)
        }
        func closeConnection(_ outbox: ConnectionOutbox) { outbox.finish() }

        /// Whether `count` messages arrive within `seconds`.
        nonisolated func waitFor(_ count: Int, seconds: Double) async -> Bool {
            let counts = self.counts
            return await withTaskGroup(of: Bool.self) { group in
                group.addTask {
                    for await n in counts where n >= count { return true }
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

    static func socket(_ hub: RecordingHub, _ limits: SyncLimits) -> SyncSocket<RecordingHub> {
        SyncSocket(hub: hub, limits: ConnectionLimits(), budget: InboundBudget(limit: 64 << 20), quotas: UserQuotas(limits: limits),
                   logger: SyncSocketTests.quiet)
    }

    @Test func aUserPastItsByteRateIsReadMoreSlowly() async throws {
        var limits = SyncLimits()
        limits.inboundBytesPerSecondPerUser = 40_000
        let hub = RecordingHub()
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let run = Task { await Self.socket(hub, limits).run(user: UserContext(id: "u"), frames: frames) { _ in } }
        // Three messages of 40,000 bytes: the first is the burst, the second leaves the user
        // 40,000 bytes in debt, so the third is not read until a second later.
        let payload = String(repeating: "q", count: 40_000)
        let started = ContinuousClock.now
        for n in 1...3 {
            client.yield(SyncSocketTests.frame(.query(session: UInt64(n), version: 1, subscriptions: [
                Subscription(name: payload, objectType: "Item", query: "complexity >= 0"),
            ])))
        }
        #expect(await hub.waitFor(3, seconds: 30))
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(900), "three messages of 40,000 bytes were read in \(elapsed) at 40,000 bytes/s")
        client.finish()
        await run.value
    }

    @Test func subscriptionSetsPastTheRateWaitTheirTurn() async throws {
        var limits = SyncLimits()
        limits.subscriptionSetsPerMinutePerUser = 1
        let hub = RecordingHub()
        let (frames, client) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        let run = Task { await Self.socket(hub, limits).run(user: UserContext(id: "u"), frames: frames) { _ in } }
        let query = ProtocolMessage.query(session: 1, version: 1, subscriptions: [Subscription(name: "s", objectType: "Item", query: "complexity >= 0")])
        client.yield(SyncSocketTests.frame(query))
        client.yield(SyncSocketTests.frame(query))
        #expect(await hub.waitFor(1, seconds: 30))
        // The second set is due a minute after the first: it has not reached the hub 1 s later.
        #expect(!(await hub.waitFor(2, seconds: 1)), "a second subscription set within the minute reached the hub")
        client.finish()
        await run.value
    }

    @Test func aConnectionPastTheUsersLimitGetsError243() async throws {
        var limits = SyncLimits()
        limits.maxConnectionsPerUser = 1
        let quotas = UserQuotas(limits: limits)
        #expect(quotas.openConnection("u"), "the user's one connection")
        let socket = SyncSocket(hub: RecordingHub(), limits: ConnectionLimits(), budget: InboundBudget(limit: 1 << 20), quotas: quotas,
                                logger: SyncSocketTests.quiet)
        let sent = Mutex<[ProtocolMessage]>([])
        let (frames, _) = AsyncThrowingStream.makeStream(of: InboundFrame.self)
        await socket.run(user: UserContext(id: "u"), frames: frames) { bytes in
            let message = try ProtocolCodec.decode(Array(bytes.readableBytesView))
            sent.withLock { $0.append(message) }
        }
        let messages = sent.withLock { $0 }
        guard messages.count == 1, case .error(let e) = messages[0] else {
            Issue.record("expected one ERROR, got \(messages)")
            return
        }
        #expect(e.code == 243)
        #expect(e.tryAgain)
        #expect(e.message.contains("1 sync connections open"))
        #expect(quotas.connections(of: "u") == 1, "the refused connection was not counted")
    }

    /// The messages in what a sync client received (the 101 response first).
    static func messages(_ received: [UInt8]) -> [ProtocolMessage] {
        guard let head = WireFormat.response(received) else { return [] }
        return WireFormat.messages(WireFormat.frames(received[head.headEnd...]))
    }

    static func errors(_ received: [UInt8]) -> [ProtocolError] {
        messages(received).compactMap { if case .error(let e) = $0 { e } else { nil } }
    }

    @Test func theServerRefusesAUsersConnectionPastItsLimit() async throws {
        try await LiveServer.withServer(configure: { $0.syncLimits.maxConnectionsPerUser = 1 }) { port in
            let ann = try await LiveServer.anonymousUser(port: port)
            let first = try await LiveServer.syncSocket(port: port, token: ann.token)
            let second = try await LiveServer.syncSocket(port: port, token: ann.token)
            #expect(await second.wait(seconds: 30) { _, closed in closed }, "the second connection of the user stayed open")
            #expect(Self.errors(second.received).map(\.code) == [243])
            // Another user is not limited by the first, and the first connection still works.
            let bob = try await LiveServer.anonymousUser(port: port)
            let other = try await LiveServer.syncSocket(port: port, token: bob.token)
            for client in [first, other] {
                try await client.send(WireFormat.message(.ping(timestamp: 5)))
                #expect(await client.wait(seconds: 30) { received, _ in Self.messages(received).contains(.pong(timestamp: 5)) })
            }
        }
    }

    @Test func theServerRefusesABindPastTheSessionsOfAConnection() async throws {
        try await LiveServer.withServer(configure: { $0.syncLimits.maxSessionsPerConnection = 1 }) { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let client = try await LiveServer.syncSocket(port: port, token: user.token)
            for session in [UInt64(1), 2] {
                try await client.send(WireFormat.message(.bind(session: session, database: "db\(session)", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
            }
            #expect(await client.wait(seconds: 30) { received, _ in !Self.errors(received).isEmpty })
            let errors = Self.errors(client.received)
            #expect(errors.map(\.code) == [244])
            #expect(errors.first?.session == 2)
            #expect(Self.messages(client.received).contains { if case .ident(1, _, _) = $0 { true } else { false } }, "session 1 was bound")
        }
    }
}
