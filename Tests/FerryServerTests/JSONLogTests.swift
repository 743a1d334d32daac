import FerryCore
import FerryServer
import Foundation
import Logging
import Testing

/// `--log-format json` (issue 14): every line is one JSON object, and every line about a sync
/// connection carries its connection id and user id.
@Suite("Server: JSON logs")
struct JSONLogTests {
    final class Lines: @unchecked Sendable {
        private let lock = ThreadLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    @Test func everyLineIsJSONAndSyncLinesNameConnectionAndUser() async throws {
        let lines = Lines()
        var logger = Logger(label: "ferry-server") { JSONLogHandler(label: $0, sink: { lines.add($0) }) }
        logger.logLevel = .info
        var userId = ""
        try await LiveServer.withServer(logger: logger) { port in
            let device = try await OperationsDevice.connect(port: port, sdk: "ferry/json-test")
            userId = device.userId
            try await device.subscribe()
            try await device.uploadWithRejections()
            await device.client.close()
            try await AdminCall.eventually("the connection's closing line") {
                lines.all.contains { $0.contains("sync connection") && $0.contains("closed") }
            }
        }
        let objects = try lines.all.map { line in
            #expect(!line.contains("\n"))
            return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
        }
        #expect(objects.count >= 4)
        for o in objects {
            #expect(o["time"] is String && o["level"] is String && o["message"] is String && o["label"] as? String == "ferry-server")
        }
        let sync = objects.filter { ($0["message"] as? String)?.hasPrefix("sync connection") == true || ($0["message"] as? String)?.contains("\"Item\"") == true }
        #expect(sync.count >= 3)  // opened, the compensating writes, closed
        for o in sync {
            #expect(o["user_id"] as? String == userId, "\(o)")
            #expect(Int(o["connection_id"] as? String ?? "") != nil, "\(o)")
        }
        let opened = try #require(objects.first { ($0["message"] as? String)?.contains("opened") == true })
        #expect((opened["message"] as? String)?.contains("ferry/json-test") == true)
        // time: ISO 8601 UTC.
        #expect((objects[0]["time"] as? String)?.hasSuffix("Z") == true)
    }

    @Test func metadataAndMessagesAreEscaped() throws {
        let lines = Lines()
        var logger = Logger(label: "x") { JSONLogHandler(label: $0, sink: { lines.add($0) }) }
        logger[metadataKey: "user_id"] = "a\"b"
        logger.warning("line one\nline \"two\"", metadata: ["n": "\(3)", "list": ["a", "b"], "message": "clash"])
        let line = try #require(lines.all.first)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(o["message"] as? String == "line one\nline \"two\"")
        #expect(o["level"] as? String == "warning" && o["user_id"] as? String == "a\"b" && o["n"] as? String == "3")
        #expect(o["list"] as? [String] == ["a", "b"] && o["meta_message"] as? String == "clash")
    }
}
