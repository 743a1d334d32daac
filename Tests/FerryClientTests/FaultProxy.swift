import FerryTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// tools/fault-proxy (build/ferry-fault-proxy, or $FERRY_FAULT_PROXY) as a child process
/// between the test's clients and its server: `url` is what clients connect to; `command`
/// sends one control line (pass, delay MS, blackhole, refuse, reset, chaos ..., stats) and
/// returns the proxy's answer.
final class FaultProxy: @unchecked Sendable {
    static var binary: String? {
        if let p = ProcessInfo.processInfo.environment["FERRY_FAULT_PROXY"], !p.isEmpty { return p }
        let p = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("build/ferry-fault-proxy").path
        return FileManager.default.isExecutableFile(atPath: p) ? p : nil
    }

    private var process: ChildProcess?
    private var control: Int32 = -1
    private var pending: [UInt8] = []
    let url: String

    /// Starts the proxy in front of `serverURL` (http://127.0.0.1:PORT).
    convenience init(serverURL: String, seed: UInt64 = 1) throws {
        try self.init(serverURLs: [serverURL], seed: seed)
    }

    /// Starts the proxy in front of several servers (the nodes of a cluster): each new
    /// connection goes to the next one (`targets`, `target-down N`, `target-up N` control them).
    init(serverURLs: [String], seed: UInt64 = 1) throws {
        guard let binary = Self.binary else { throw ProxyError("no build/ferry-fault-proxy (run scripts/build.sh)") }
        var targets: [String] = []
        for serverURL in serverURLs {
            guard let target = serverURL.split(separator: "/").last else { throw ProxyError("bad server URL \(serverURL)") }
            targets += ["--target", String(target)]
        }
        let dir = SyncTestServer.temporaryDirectory("proxy")
        let portFile = dir + "/port", controlFile = dir + "/control"
        // Never an unread pipe: the proxy would block once it filled (its output goes to /dev/null).
        let process = try ChildProcess(binary, targets + ["--port-file", portFile, "--control-port-file", controlFile, "--seed", String(seed)])
        self.process = process
        let deadline = Date().addingTimeInterval(20)
        var port = 0
        while port == 0 {
            if let s = try? String(contentsOfFile: portFile, encoding: .utf8), let p = Int(s.trimmingCharacters(in: .whitespacesAndNewlines)) { port = p }
            else if Date() > deadline || !process.isRunning { throw ProxyError("the proxy did not start") }
            else { usleep(10_000) } // polling a file with a deadline
        }
        guard let cs = try? String(contentsOfFile: controlFile, encoding: .utf8), let cp = Int(cs.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw ProxyError("the proxy wrote no control port")
        }
        url = "http://127.0.0.1:\(port)"
        control = try Self.connect(port: cp)
    }

    deinit { stop() }

    func stop() {
        if control >= 0 { close(control); control = -1 }
        if let process, process.isRunning {
            process.signal(SIGTERM)
            process.waitUntilExit()
        }
    }

    /// Sends one command; the answer line ("ok ..." or "error ...").
    @discardableResult
    func command(_ line: String) throws -> String {
        let bytes = Array((line + "\n").utf8)
        guard bytes.withUnsafeBytes({ send(control, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw ProxyError("cannot send to the proxy's control port")
        }
        while true {
            if let nl = pending.firstIndex(of: 10) {
                let answer = String(decoding: pending[..<nl], as: UTF8.self)
                pending.removeSubrange(...nl)
                guard answer.hasPrefix("ok") else { throw ProxyError("the proxy refused '\(line)': \(answer)") }
                return answer
            }
            var buf = [UInt8](repeating: 0, count: 512)
            let n = buf.withUnsafeMutableBytes { recv(control, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw ProxyError("the proxy closed its control port") }
            pending += buf[..<n]
        }
    }

    /// The proxy's counters (accepted, active, reset, refused).
    func stats() throws -> [String: Int] {
        var out: [String: Int] = [:]
        for part in try command("stats").split(separator: " ").dropFirst() {
            let kv = part.split(separator: "=")
            if kv.count == 2, let v = Int(kv[1]) { out[String(kv[0])] = v }
        }
        return out
    }

    private static func connect(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard rc == 0 else {
            close(fd)
            throw ProxyError("cannot connect to the proxy's control port \(port)")
        }
        // A control answer that never comes must not hang the test.
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }
}

struct ProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
