import FerryCore
import FerryServer
import Foundation
import Testing

/// Issue 11, point 6 (a): a sync client that stops reading while another device of its user
/// writes is disconnected instead of growing the server without bound: when its socket takes
/// nothing for the write-stall timeout, or when more than the per-connection bound is waiting
/// to be sent (then with ERROR 242 first). Its device would resume from its version.
@Suite("Server: clients that stop reading")
struct SlowConsumerTests {
    /// Waits until the hub has only the writer's sync connection left (the admin API's count).
    static func hubForgetsTheConnection(port: Int, seconds: Double = 25) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await LiveServer.syncConnections(port: port) == 1 { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// A sync client of a user that stops reading, then another device of that user uploads
    /// 12 MiB (which the server must send to the first).
    static func clientThatStopsReading(port: Int) async throws -> RawClient {
        let user = try await LiveServer.anonymousUser(port: port)
        let client = try await LiveServer.syncSocket(port: port, token: user.token, receiveBuffer: 4096)
        #expect(try await SyncTraffic.subscribe(client))
        try await client.pauseReading()
        let writer = try await LiveServer.syncSocket(port: port, token: user.token)
        #expect(try await SyncTraffic.subscribe(writer))
        try await SyncTraffic.upload(writer, userId: user.id, items: 192, itemBytes: 64 << 10)
        return client
    }

    @Test func aClientThatStopsReadingIsDisconnected() async throws {
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.writeStallTimeout = .seconds(1)
            $0.connectionLimits.maxQueuedBytesPerConnection = 1 << 30
        }) { port in
            let client = try await Self.clientThatStopsReading(port: port)
            #expect(try await Self.hubForgetsTheConnection(port: port), "the server keeps a connection that does not read")
            try await client.resumeReading()
            #expect(await client.waitClosed(seconds: 60))
        }
    }

    @Test func aClientThatFallsBehindGetsErrorAndIsDisconnected() async throws {
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.writeStallTimeout = .seconds(600)
            $0.connectionLimits.maxQueuedBytesPerConnection = 256 << 10
        }) { port in
            let client = try await Self.clientThatStopsReading(port: port)
            #expect(try await Self.hubForgetsTheConnection(port: port), "the server queues without bound for a client that does not read")
            try await client.resumeReading()
            let closing = await client.wait(seconds: 60) { received, _ in
                guard let head = WireFormat.response(received) else { return false }
                return WireFormat.closeCode(WireFormat.frames(received[head.headEnd...])) != nil
            }
            #expect(closing)
            let head = try #require(WireFormat.response(client.received))
            let messages = WireFormat.messages(WireFormat.frames(client.received[head.headEnd...]))
            guard case .error(let error)? = messages.last else {
                Issue.record("the last of \(messages.count) messages is not an ERROR")
                return
            }
            #expect(error.code == 242)
            #expect(error.tryAgain)
            #expect(error.message.contains("fell behind"))
        }
    }

    /// Issue 22, point 9: the memory slow connections cost is bounded by a small window each,
    /// not by the per-connection bound: 20 sync clients that never read while another device
    /// of their user writes 400 items of 32 KB. Before, every one queued all 12.8 MB (204.6 MB
    /// together, measured with the window off); each session is now fed from memory only while its queue is within
    /// `fanOutWindowBytes`, and caught up from storage once its client reads.
    @Test func clientsThatDoNotReadHoldOnlyAWindowEach() async throws {
        let window = 256 << 10
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.writeStallTimeout = .seconds(600)
            $0.syncLimits.fanOutWindowBytes = window
        }) { port in
            let readers = try await Self.readersThatStopWhileAnotherDeviceWrites(20, port: port)
            let queued = try #require(MetricsTests.value(try await MetricsTests.scrape(port: port), "ferry_outbox_queued_bytes"))
            // A window and one message (a commit of one item, about 33 KB) each, at most.
            #expect(queued <= Double(20 * (window + (64 << 10))), "\(Int(queued)) bytes queued for 20 clients that do not read")
            // A reader that reads again is caught up from storage with every item.
            try await readers[0].resumeReading()
            let caughtUp = await readers[0].wait(seconds: 120) { received, _ in
                guard let head = WireFormat.response(received) else { return false }
                return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains {
                    if case .download(_, let v, _, _, _, _, _) = $0 { return v >= 400 }
                    return false
                }
            }
            #expect(caughtUp, "a reader that read again was not caught up")
        }
    }

    /// Issue 22, point 9: every connection's queue together is bounded; past it the connection
    /// furthest behind is dropped with ERROR 242, and the total stays near the bound.
    @Test func pastTheServersBoundTheSlowestConnectionsAreDropped() async throws {
        let bound = 2 << 20
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.writeStallTimeout = .seconds(600)
            $0.connectionLimits.maxQueuedBytesTotal = bound
            $0.syncLimits.fanOutWindowBytes = 16 << 20  // fed from memory: only the total bounds them
        }) { port in
            let readers = try await Self.readersThatStopWhileAnotherDeviceWrites(5, port: port)
            let metrics = try await MetricsTests.scrape(port: port)
            let queued = try #require(MetricsTests.value(metrics, "ferry_outbox_queued_bytes"))
            #expect(queued <= Double(bound + (64 << 10)), "\(Int(queued)) bytes queued past a bound of \(bound)")
            #expect((MetricsTests.value(metrics, "ferry_outbox_shed_total") ?? 0) >= 1)
            // The dropped ones get ERROR 242 once they read.
            var dropped = 0
            for r in readers {
                try await r.resumeReading()
                let closed = await r.waitClosed(seconds: 30)
                guard closed, let head = WireFormat.response(r.received) else { continue }
                if WireFormat.messages(WireFormat.frames(r.received[head.headEnd...])).contains(where: {
                    if case .error(let e) = $0 { return e.code == 242 }
                    return false
                }) { dropped += 1 }
            }
            #expect(dropped >= 1, "no connection was dropped with ERROR 242")
        }
    }

    /// Issue 22, point 9: a connection that toggles a large subscription set without reading
    /// (each toggle a bootstrap of the whole view) made the server queue 124 times what it
    /// sent. The per-connection bound covers it: once that much waits, the server stops reading
    /// the connection's messages, so its queue stays within the bound and one bootstrap while
    /// the rest of its 2,000 toggles wait in the kernel's buffers; other devices sync on.
    @Test func togglingALargeSetWithoutReadingStaysWithinTheBound() async throws {
        let bound = 2 << 20
        try await LiveServer.withServer(configure: {
            $0.connectionLimits.writeStallTimeout = .seconds(600)
            $0.connectionLimits.maxQueuedBytesPerConnection = bound
        }) { port in
            let user = try await LiveServer.anonymousUser(port: port)
            let writer = try await LiveServer.syncSocket(port: port, token: user.token)
            #expect(try await SyncTraffic.subscribe(writer))
            // A view of 40 items of 32 KB: each bootstrap of it is about 1.3 MB.
            try await SyncTraffic.upload(writer, userId: user.id, items: 40, itemBytes: 32 << 10)
            #expect(await Self.acknowledged(writer, through: 40))
            let toggler = try await LiveServer.syncSocket(port: port, token: user.token, receiveBuffer: 4096)
            #expect(try await SyncTraffic.subscribe(toggler))
            try await toggler.pauseReading()
            let none = [Subscription(name: "none", objectType: "Item", query: "complexity < 0")]
            // Sent from a task: once the server stops reading this connection, the sends wait.
            let sender = Task {
                for v in UInt64(2)...UInt64(2_001) {
                    try await toggler.send(WireFormat.message(.query(session: 1, version: v, subscriptions: v % 2 == 0 ? none : SyncTraffic.allItems)))
                }
            }
            var peak = 0.0
            for _ in 0..<100 {
                peak = max(peak, MetricsTests.value(try await MetricsTests.scrape(port: port), "ferry_outbox_queued_bytes") ?? 0)
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(peak > Double(bound / 2), "the toggles were not answered: \(Int(peak)) bytes queued at most")
            #expect(peak <= Double(bound + (2 << 20)), "\(Int(peak)) bytes queued for a connection bounded at \(bound)")
            // Meanwhile the writer's device syncs on.
            try await SyncTraffic.upload(writer, userId: user.id, items: 41, itemBytes: 10)
            #expect(await Self.acknowledged(writer, through: 41))
            sender.cancel()
            await toggler.close()
        }
    }

    /// `count` sync clients of one user subscribed to every item that then stop reading, while
    /// another device of the user writes 400 items of 32 KB (12.8 MB for each reader: more than
    /// the kernel's socket buffers take); returns once the writer is acknowledged.
    static func readersThatStopWhileAnotherDeviceWrites(_ count: Int, port: Int) async throws -> [RawClient] {
        let user = try await LiveServer.anonymousUser(port: port)
        var readers: [RawClient] = []
        for _ in 0..<count {
            let c = try await LiveServer.syncSocket(port: port, token: user.token, receiveBuffer: 4096)
            #expect(try await SyncTraffic.subscribe(c))
            try await c.pauseReading()
            readers.append(c)
        }
        let writer = try await LiveServer.syncSocket(port: port, token: user.token)
        #expect(try await SyncTraffic.subscribe(writer))
        try await SyncTraffic.upload(writer, userId: user.id, items: 400, itemBytes: 32 << 10)
        #expect(await acknowledged(writer, through: 400), "the writer's uploads were not all acknowledged")
        return readers
    }

    /// Waits until `client` got a DOWNLOAD acknowledging client version `version`.
    static func acknowledged(_ client: RawClient, through version: UInt64) async -> Bool {
        await client.wait(seconds: 120) { received, _ in
            guard let head = WireFormat.response(received) else { return false }
            return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains {
                if case .download(_, _, let ack, _, _, _, _) = $0 { return ack >= version }
                return false
            }
        }
    }
}
