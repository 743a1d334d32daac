import FerryTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 13: a server whose process has no file descriptors left must not spin on `accept`
/// (measured before: 100 % of a core, 92,778 failed `accept4` calls in 5 s, the admin API dark,
/// and after about 300 s a crash). It stops accepting for a moment at a time, says so once in
/// its log, and serves again as soon as descriptors are free. The server runs as a child
/// process, so the test can lower that process's open-files limit (`prlimit`) without
/// touching the test process, which every test shares; lowered after the start, the limit is
/// below what the server planned its connection ceiling for, as when the data files, the
/// database or other libraries take descriptors the server does not count.
@Suite("Server: accepting at the file-descriptor limit")
struct DescriptorLimitTests {
    /// User and system CPU seconds the process has used (/proc/PID/stat).
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let fields = stat[stat.index(after: try #require(stat.lastIndex(of: ")")))...].split(separator: " ")
        // After the command: state is field 3, utime field 14, stime field 15.
        let ticks = try #require(Double(fields[11])) + (try #require(Double(fields[12])))
        return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Polls `body` (a file the child writes) until it is true or `seconds` pass.
    static func eventually(seconds: Double, _ body: () -> Bool) async -> Bool {
        await poll(seconds: seconds, body)
    }

    @Test func atTheLimitTheServerPausesAcceptingLogsItAndRecovers() async throws {
        let server = try ServerExecutable("fd-limit", arguments: ["--log-level", "info", "--header-timeout", "120"])
        let pid = server.pid
        func log() -> String { server.log() }
        #expect(await Self.eventually(seconds: 60) { server.port != nil }, "the server did not start: \(log().suffix(2000))")
        let port = try #require(server.port)

        // Room for 8 more descriptors, then 40 connections: most wait in the backlog.
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        // ChildProcess (posix_spawn), not Foundation's Process: see ChildProcess.
        let status = try ChildProcess.run("/usr/bin/prlimit", ["--pid", String(pid), "--nofile=\(open + 8):\(open + 8)"])
        try #require(status == 0, "prlimit failed: status \(status)")
        var clients: [RawClient] = []
        for _ in 0..<40 { clients.append(try await RawClient.connect(port: port)) }
        #expect(await Self.eventually(seconds: 30) { log().contains("cannot accept connections: the process has no file descriptors left") },
                "no log line about the descriptor shortage: \(log().suffix(2000))")

        // Holding the connections: a spin would use about 2 s of CPU here.
        let before = try Self.cpuSeconds(pid)
        try await Task.sleep(for: .seconds(2))
        let used = try Self.cpuSeconds(pid) - before
        #expect(used < 0.5, "the server used \(used) s of CPU in 2 s while it could not accept")
        #expect(log().components(separatedBy: "cannot accept connections").count == 2, "the shortage was logged more than once")
        // While it waits, the server has descriptors to spare (its reserve) for everything else.
        let held = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        #expect(open + 8 - held >= 8, "\(held) descriptors open of \(open + 8) while not accepting (the reserve is 16)")

        // Released, the server accepts again: the health check answers.
        for c in clients { await c.close() }
        let health = try await LiveServer.request(port: port, "GET", "/health")
        #expect(String(decoding: health, as: UTF8.self).hasSuffix("ok"), "no answer to /health: \(String(decoding: health, as: UTF8.self))")
        #expect(log().contains("accepting connections again"))
        #expect(server.process.isRunning)
        server.stop()
        #expect(server.process.exitedCleanly, "the server did not stop cleanly: \(log().suffix(2000))")
    }
}
