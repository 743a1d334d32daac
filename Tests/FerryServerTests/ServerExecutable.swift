import FerryTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real `ferry-server` process on the example app, for the tests of what only the executable
/// does (its flags, its log, its process limits): a data directory of its own, its port read
/// from `--port-file`, its log (standard error) kept in a file. Killed if a test leaves it
/// running.
final class ServerExecutable {
    let process: ChildProcess
    let directory: String
    let logFile: String
    private let portFile: String

    /// The binary beside the tests (`swift build`), or `FERRY_SERVER_BINARY`.
    static var binary: String? {
        if let p = ProcessInfo.processInfo.environment["FERRY_SERVER_BINARY"], !p.isEmpty { return p }
        let here = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [here.appendingPathComponent("ferry-server"), here.deletingLastPathComponent().appendingPathComponent("ferry-server"),
                          Bundle.main.bundleURL.appendingPathComponent("ferry-server")] {
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
        }
        return nil
    }

    /// Starts the server with `arguments` after the app, data, port and port-file ones: on
    /// `appDirectory` (the example app by default) and `dataDirectory` (by default one inside
    /// this server's directory, removed with it; a given one outlives it, for a restart).
    init(_ name: String, appDirectory: String = AuthAPITests.example, dataDirectory: String? = nil, arguments: [String],
         environment: [String: String] = [:]) throws {
        let binary = try #require(Self.binary, "no ferry-server binary beside the tests (swift build, or FERRY_SERVER_BINARY)")
        directory = NSTemporaryDirectory() + "ferry-\(name)-\(UInt64.random(in: 0...UInt64.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        portFile = directory + "/port"
        logFile = directory + "/server.log"
        try #require(FileManager.default.createFile(atPath: logFile, contents: nil), "cannot create \(logFile)")
        process = try ChildProcess(binary, ["--app-dir", appDirectory, "--data", dataDirectory ?? directory + "/data", "--port", "0", "--port-file", portFile] + arguments,
                                   environment: ProcessInfo.processInfo.environment.merging(["jwtSigningKey": AuthAPITests.jwtKey].merging(environment) { _, new in new }) { _, new in new },
                                   standardError: logFile)
    }

    deinit {
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    var pid: Int32 { process.pid }

    func log() -> String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// The port the server listens on, once it wrote its port file (nil before).
    var port: Int? {
        (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Stops the server with SIGTERM and waits for it.
    func stop() {
        kill(pid, SIGTERM)
        process.waitUntilExit()
    }
}
