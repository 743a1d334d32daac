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
}
