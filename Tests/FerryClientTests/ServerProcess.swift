import FerryTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A `ferry-server` as a child process (the one `swift build` made beside the tests, or
/// $FERRY_SERVER_BINARY), for the tests that kill a node with SIGKILL and start it again.
final class ServerProcess: @unchecked Sendable {
    static var binary: String? {
        if let p = ProcessInfo.processInfo.environment["FERRY_SERVER_BINARY"], !p.isEmpty { return p }
        // The test bundle and the executable are built into the same folder.
        let here = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [here.appendingPathComponent("ferry-server"), here.deletingLastPathComponent().appendingPathComponent("ferry-server")] {
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for p in [".build/debug/ferry-server", "build/ferry-server"] {
            let path = root.appendingPathComponent(p).path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    private var process: ChildProcess?
    private let arguments: [String]
    private let environment: [String: String]
    private let directory: String
    /// The port it listens on (kept across restarts, so a proxy in front keeps its target).
    private(set) var port = 0
    var url: String { "http://127.0.0.1:\(port)" }

    /// Starts `ferry-server --app-dir APP --data (a new directory) --database DATABASE`.
    init(appDirectory: String, database: String, environment: [String: String], arguments extra: [String] = []) throws {
        directory = SyncTestServer.temporaryDirectory("node")
        arguments = ["--app-dir", appDirectory, "--data", directory + "/data", "--database", database,
                     "--database-connections", "4", "--log-level", "info"] + extra
        self.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        try start()
    }

    deinit { kill() }

    /// Starts the process (on its previous port after a kill) and waits until it listens.
    func start() throws {
        guard let binary = Self.binary else { throw ProxyError("no ferry-server binary (swift build, or FERRY_SERVER_BINARY)") }
        let portFile = directory + "/port-\(UInt64.random(in: 0...UInt64.max))"
        let log = directory + "/server.log"
        guard FileManager.default.createFile(atPath: log, contents: nil) else { throw ProxyError("cannot create \(log)") }
        let p = try ChildProcess(binary, arguments + ["--port", String(port), "--port-file", portFile], environment: environment, standardError: log)
        process = p
        let deadline = Date().addingTimeInterval(60)
        while true {
            if let s = try? String(contentsOfFile: portFile, encoding: .utf8), let n = Int(s.trimmingCharacters(in: .whitespacesAndNewlines)), n > 0 {
                port = n
                return
            }
            guard p.isRunning, Date() < deadline else {
                let tail = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw ProxyError("ferry-server did not start: \(tail.suffix(2000))")
            }
            usleep(20_000) // polling the port file, with a deadline
        }
    }

    /// SIGKILL: no clean shutdown, as a crashed machine.
    func kill() {
        guard let p = process, p.isRunning else { return }
        p.signal(SIGKILL)
        p.waitUntilExit()
        process = nil
    }
}
