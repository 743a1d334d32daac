@testable import FerryServer
import Foundation
import Logging
import Testing

/// A real ferry-server on the seeds' Item app, in-process on 127.0.0.1 and a port the OS
/// picks, for tests that talk to it over sockets.
enum LiveServer {
    static let adminToken = "an-admin-token-for-tests-of-32-bytes-or-more"

    static func withServer(configure: (inout ServerConfiguration) -> Void = { _ in }, logger given: Logger? = nil,
                           _ body: (Int) async throws -> Void) async throws {
        var config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                         dataDirectory: NSTemporaryDirectory() + "ferry-live-\(UInt64.random(in: 0...UInt64.max))",
                                         secrets: ["jwtSigningKey": AuthAPITests.jwtKey, "FERRY_ADMIN_TOKEN": adminToken])
        // Dozens of servers run at once in the test process: without their descriptor
        // reserves (16 each) it stays below the ~1,300 descriptors past which Foundation's
        // Process.run reads out of bounds (ASan). The reserve is tested on the executable.
        config.descriptorReserve = 0
        config.passwordHashing = .fastForTests   // as in AuthAPITests.configuration
        configure(&config)
        var logger = given ?? Logger(label: "ferry-server-test")
        if given == nil {
            logger.logLevel = ProcessInfo.processInfo.environment["FERRY_TEST_SERVER_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .critical
        }
        let (ports, sink) = AsyncStream.makeStream(of: Int.self)
        let app = try await FerryServer.make(config, logger: logger) { port in
            sink.yield(port)
            sink.finish()
        }
        let server = Task { try await app.runService(gracefulShutdownSignals: []) }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else {
            server.cancel()
            Issue.record("the server did not start")
            return
        }
        do { try await body(port) } catch {
            await RawClient.closeAll(port: port)
            server.cancel()
            _ = await server.result
            throw error
        }
        await RawClient.closeAll(port: port)
        server.cancel()
        _ = await server.result
    }

    /// One HTTP request on a connection of its own; the whole response (the server closes it).
    static func request(port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: String = "") async throws -> [UInt8] {
        let client = try await RawClient.connect(port: port)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        try await client.send(head + "\r\n" + body)
        _ = await client.waitClosed(seconds: 60)
        await client.close()
        return client.received
    }

    /// A new anonymous user: its id and access token.
    static func anonymousUser(port: Int) async throws -> (id: String, token: String) {
        let response = try await request(port: port, "POST", "/api/client/v2.0/app/item-app-seeds/auth/providers/anon-user/login")
        let body = try #require(WireFormat.body(response))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        return (try #require(json["user_id"] as? String), try #require(json["access_token"] as? String))
    }

    /// The sync connections the hub has open (admin API).
    static func syncConnections(port: Int) async throws -> Int? {
        let response = try await request(port: port, "GET", "/api/admin/v1/sync", headers: ["Authorization": "Bearer \(adminToken)"])
        guard let body = WireFormat.body(response),
              let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else { return nil }
        return json["connections"] as? Int
    }

    /// Opens a sync WebSocket for `token`; the client, with the 101 response already read.
    static func syncSocket(port: Int, token: String, receiveBuffer: Int? = nil) async throws -> RawClient {
        let client = try await RawClient.connect(port: port, receiveBuffer: receiveBuffer)
        try await client.send(WireFormat.upgradeRequest(token: token))
        let upgraded = await client.wait(seconds: 60) { received, _ in WireFormat.response(received) != nil }
        try #require(upgraded && WireFormat.response(client.received)?.status == 101, "the upgrade was refused: \(String(decoding: client.received, as: UTF8.self))")
        return client
    }
}
