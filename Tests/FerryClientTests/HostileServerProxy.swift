import FerryCore
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A hostile or broken server, made from a real one: a TCP proxy on 127.0.0.1 in front of a
/// test server that passes everything through, except that once a connection has upgraded to
/// WebSocket, each sync message the server sends is decoded and handed to `rewrite`, whose
/// bytes go to the client instead (one unmasked binary frame). So a test gives a real client
/// figures no honest server sends (issue 22, point 2). Blocking sockets, a thread per
/// direction of each connection; `stop` closes the listener and every connection.
final class HostileServerProxy: @unchecked Sendable {
    let url: String
    private let listener: Int32
    private let upstreamPort: UInt16
    /// Rewrites one server message into the bytes the client gets (a message's encoding, or
    /// anything else); changeable while clients are connected.
    let rewrite: Mutex<@Sendable (ProtocolMessage) -> [UInt8]>
    private let sockets = Mutex<Set<Int32>>([])
    private let stopped = Atomic<Bool>(false)

    init(serverURL: String, rewrite: @escaping @Sendable (ProtocolMessage) -> [UInt8] = { ProtocolCodec.encode($0) }) throws {
        guard let portText = serverURL.split(separator: ":").last, let port = UInt16(portText) else { throw ProxyError("bad server URL \(serverURL)") }
        upstreamPort = port
        self.rewrite = Mutex(rewrite)
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = self.listener
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 64) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard listener >= 0, ok else { throw ProxyError("the proxy cannot listen") }
        url = "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    struct ProxyError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }

    func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for s in sockets.withLock({ $0 }) { shutdown(s, Int32(SHUT_RDWR)) }
    }

    deinit { stop() }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        a.sin_port = port.bigEndian
        return a
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: upstreamPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else { close(client); close(upstream); continue }
            sockets.withLock { $0.formUnion([client, upstream]) }
            let done = Atomic<Int>(0)
            let finish: @Sendable () -> Void = { [self] in
                shutdown(client, Int32(SHUT_RDWR)); shutdown(upstream, Int32(SHUT_RDWR))
                if done.add(1, ordering: .sequentiallyConsistent).newValue == 2 {
                    sockets.withLock { $0.subtract([client, upstream]) }
                    close(client); close(upstream)
                }
            }
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                while true {
                    let n = read(client, &buffer, buffer.count)
                    if n <= 0 || !Self.writeAll(upstream, buffer[0..<n]) { break }
                }
                finish()
            }
            Thread.detachNewThread { [self] in
                serverToClient(upstream, client)
                finish()
            }
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Passes the response head through; after a 101, rewrites each sync message.
    private func serverToClient(_ upstream: Int32, _ client: Int32) {
        var pending: [UInt8] = []
        var upgraded: Bool? = nil
        var message: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = read(upstream, &buffer, buffer.count)
            if n <= 0 { return }
            pending += buffer[0..<n]
            if upgraded == nil {
                guard let end = pending.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { continue }
                let head = String(decoding: pending[..<end], as: UTF8.self)
                upgraded = head.hasPrefix("HTTP/1.1 101")
                guard Self.writeAll(client, pending[..<end]) else { return }
                pending.removeFirst(end)
            }
            if upgraded == false {
                guard Self.writeAll(client, pending[...]) else { return }
                pending = []
                continue
            }
            // Whole frames only; the server's frames are unmasked.
            while pending.count >= 2 {
                let opcode = pending[0] & 0x0F, fin = pending[0] & 0x80 != 0
                var length = Int(pending[1] & 0x7F), at = 2
                if length == 126 {
                    guard pending.count >= 4 else { break }
                    length = Int(pending[2]) << 8 | Int(pending[3]); at = 4
                } else if length == 127 {
                    guard pending.count >= 10 else { break }
                    length = pending[2..<10].reduce(0) { $0 << 8 | Int($1) }; at = 10
                }
                guard pending.count >= at + length else { break }
                let payload = pending[at..<(at + length)]
                var out: [UInt8] = []
                if opcode == 0x2 || opcode == 0x0 {
                    message += payload
                    if fin {
                        if let decoded = try? ProtocolCodec.decode(message) {
                            out = Self.frame(rewrite.withLock { $0 }(decoded))
                        } else {
                            out = Self.frame(message)
                        }
                        message = []
                    }
                } else {
                    out = Array(pending[..<(at + length)])
                }
                pending.removeFirst(at + length)
                if !out.isEmpty, !Self.writeAll(client, out[...]) { return }
            }
        }
    }

    /// One unmasked binary frame.
    static func frame(_ payload: [UInt8]) -> [UInt8] {
        var f: [UInt8] = [0x82]
        if payload.count < 126 { f.append(UInt8(payload.count)) }
        else if payload.count <= 0xFFFF { f += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] }
        else { f.append(127); for shift in stride(from: 56, through: 0, by: -8) { f.append(UInt8((UInt64(payload.count) >> UInt64(shift)) & 0xFF)) } }
        return f + payload
    }
}
