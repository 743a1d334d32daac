import Foundation
@testable import FerryClient

/// A one-connection TCP server on 127.0.0.1 that answers the request head with canned bytes,
/// for responses a real server will not produce on demand (a 401 to an upgrade, a ping, a
/// masked frame). It runs on its own thread with blocking sockets and a receive timeout.
final class CannedServer: @unchecked Sendable {
    let port: Int
    /// What the client sent after the response, until it closed the connection.
    let afterResponse = Arrival<[UInt8]>()
    private let listener: Int32

    /// `respond` gets the request head; with `endAfterResponse` the server then shuts down its
    /// sending side, so a body without a length ends.
    init(endAfterResponse: Bool = false, respond: @escaping @Sendable (String) -> [UInt8]) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = self.listener
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard listener >= 0, ok else { throw CocoaError(.fileReadUnknown) }
        port = Int(UInt16(bigEndian: address.sin_port))
        let arrival = afterResponse
        Thread.detachNewThread {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { arrival.deliver([]); return }
            defer { close(client) }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
                let count = read(client, &buffer, buffer.count)
                if count <= 0 { break }
                request += buffer[0..<count]
            }
            let response = respond(String(decoding: request, as: UTF8.self))
            var sent = 0
            while sent < response.count {
                let count = response[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                sent += count
            }
            if endAfterResponse { shutdown(client, Int32(SHUT_WR)) }
            var rest: [UInt8] = []
            while true {
                let count = read(client, &buffer, buffer.count)
                if count <= 0 { break }
                rest += buffer[0..<count]
            }
            arrival.deliver(rest)
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR)) // wakes a blocked accept
        close(listener)
    }

    /// A 101 response that accepts the WebSocket request in `head`, then `frames`.
    static func upgrade(_ head: String, subprotocol: String = "ferry-test", then frames: [UInt8] = []) -> [UInt8] {
        let key = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
            .map { $0.dropFirst("sec-websocket-key:".count).trimmingCharacters(in: .whitespaces) } ?? ""
        let text = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(WebSocketHandshake.expectedAccept(forKey: key))\r\n"
            + "Sec-WebSocket-Protocol: \(subprotocol)\r\n\r\n"
        return Array(text.utf8) + frames
    }
}
