import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The ferry-server executable's operations flags (issue 14): `--log-format json` makes every
/// line of its log a JSON object, `--metrics-port` serves the metrics without the token, and
/// `--node-id` names the node; a bad format is refused at the start.
@Suite("Server: the executable's operations flags")
struct ExecutableOperationsTests {
    @Test func jsonLogsAMetricsPortAndANodeName() async throws {
        let server = try ServerExecutable("exe-ops", arguments: [
            "--log-level", "info", "--log-format", "json", "--metrics-port", "0", "--node-id", "exe-node",
            "--sync-log-max-per-user", "5", "--sync-log-max-age-days", "2"], environment: ["FERRY_ADMIN_TOKEN": LiveServer.adminToken])
        func log() -> String { server.log() }
        func metricsPort() -> Int? {
            guard let line = log().split(separator: "\n").first(where: { $0.contains("/metrics") }),
                  let range = line.range(of: #"127\.0\.0\.1:[0-9]+/metrics"#, options: .regularExpression) else { return nil }
            return Int(line[range].dropFirst("127.0.0.1:".count).dropLast("/metrics".count))
        }
        #expect(await DescriptorLimitTests.eventually(seconds: 60) { server.port != nil && metricsPort() != nil }, "the server did not start: \(log().suffix(2000))")
        let port = try #require(server.port)

        let device = try await OperationsDevice.connect(port: port, sdk: "ferry/exe")
        try await device.subscribe()
        let metrics = try await MetricsTests.scrape(port: try #require(metricsPort()), token: nil)
        #expect(MetricsTests.value(metrics, "ferry_connections") == 1)
        let stats = try await AdminCall.get(port: port, "/api/admin/v1/stats").json as? [String: Any]
        #expect(stats?["node"] as? String == "exe-node")
        await device.client.close()
        #expect(await DescriptorLimitTests.eventually(seconds: 30) { log().contains("closed") })

        server.stop()
        let lines = log().split(separator: "\n")
        #expect(lines.count >= 4)
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["message"] is String && object?["time"] is String, "not a JSON log line: \(line)")
        }
        let opened = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { ($0["message"] as? String)?.hasPrefix("sync connection") == true }
        #expect(opened?["user_id"] as? String == device.userId && opened?["connection_id"] != nil)
    }

    @Test func weakPasswordHashingIsRefusedOffLoopback() async throws {
        let binary = try #require(ServerExecutable.binary, "no ferry-server binary beside the tests (swift build, or FERRY_SERVER_BINARY)")
        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["--app-dir", AuthAPITests.example, "--data", NSTemporaryDirectory() + "ferry-exe-weak-\(UInt64.random(in: 0...UInt64.max))",
                            "--host", "0.0.0.0", "--port", "0", "--weak-password-hashing-for-tests"]
        let errors = Pipe()
        server.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        server.standardError = errors
        try server.run()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        server.waitUntilExit()
        #expect(server.terminationStatus != 0)
        #expect(said.contains("loopback"), "\(said)")
    }

    @Test func anUnknownLogFormatIsRefused() async throws {
        let binary = try #require(ServerExecutable.binary, "no ferry-server binary beside the tests (swift build, or FERRY_SERVER_BINARY)")
        let server = Process()
        server.executableURL = URL(fileURLWithPath: binary)
        server.arguments = ["--app-dir", AuthAPITests.example, "--data", NSTemporaryDirectory() + "ferry-exe-bad-\(UInt64.random(in: 0...UInt64.max))",
                            "--log-format", "xml"]
        server.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        server.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try server.run()
        server.waitUntilExit()
        #expect(server.terminationStatus != 0)
    }
}
