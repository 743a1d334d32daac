import FerryCore
import Foundation

/// HTTP and WebSocket bytes as a raw client writes and reads them (RFC 6455 section 5.2), for
/// tests that need to send what a real client never would.
enum WireFormat {
    static let syncPath = "/api/client/v2.0/app/item-app-seeds/realm-sync"

    static func upgradeRequest(path: String = syncPath, token: String?, subprotocol: String? = "ferry-sync.1") -> String {
        var head = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        if let subprotocol { head += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        return head + "\r\n"
    }

    /// A client frame: masked unless `masked` is false (which RFC 6455 forbids).
    static func frame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, masked: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = [(fin ? 0x80 : 0) | opcode]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if payload.count < 126 {
            bytes.append(maskBit | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            bytes.append(maskBit | 126)
            bytes += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            bytes.append(maskBit | 127)
            bytes += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) }
        }
        guard masked else { return bytes + payload }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return bytes + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
    }

    /// A sync message as one masked binary frame, or several of at most `frameSize` bytes.
    static func message(_ message: ProtocolMessage, frameSize: Int = 16 << 10) -> [UInt8] {
        fragments(ProtocolCodec.encode(message), frameSize: frameSize)
    }

    static func fragments(_ payload: [UInt8], frameSize: Int = 16 << 10, finishing: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = []
        var start = 0
        repeat {
            let end = min(payload.count, start + frameSize)
            bytes += frame(opcode: start == 0 ? 0x2 : 0x0, Array(payload[start..<end]), fin: finishing && end == payload.count)
            start = end
        } while start < payload.count
        return bytes
    }

    /// The status of the HTTP response at the start of `bytes` and where its head ends.
    static func response(_ bytes: [UInt8]) -> (status: Int, headEnd: Int)? {
        guard let end = bytes.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound else { return nil }
        let line = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n").first ?? ""
        let parts = line.split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
        return (status, end)
    }

    /// The body of a complete HTTP response with a Content-Length.
    static func body(_ bytes: [UInt8]) -> String? {
        guard let (_, end) = response(bytes) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
              let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
              bytes.count >= end + length else { return nil }
        return String(decoding: bytes[end..<(end + length)], as: UTF8.self)
    }

    struct ServerFrame: Equatable {
        var opcode: UInt8
        var fin: Bool
        var payload: [UInt8]
    }

    /// The complete server frames (unmasked) in `bytes`.
    static func frames(_ bytes: ArraySlice<UInt8>) -> [ServerFrame] {
        var frames: [ServerFrame] = []
        var i = bytes.startIndex
        while bytes.endIndex - i >= 2 {
            let b0 = bytes[i], b1 = bytes[i + 1]
            var length = Int(b1 & 0x7F)
            var at = i + 2
            if length == 126 {
                guard bytes.endIndex - at >= 2 else { break }
                length = Int(bytes[at]) << 8 | Int(bytes[at + 1])
                at += 2
            } else if length == 127 {
                guard bytes.endIndex - at >= 8 else { break }
                length = bytes[at..<(at + 8)].reduce(0) { $0 << 8 | Int($1) }
                at += 8
            }
            guard bytes.endIndex - at >= length else { break }
            frames.append(ServerFrame(opcode: b0 & 0x0F, fin: b0 & 0x80 != 0, payload: Array(bytes[at..<(at + length)])))
            i = at + length
        }
        return frames
    }

    /// The sync messages in the server's frames (binary messages, reassembled and decoded).
    static func messages(_ frames: [ServerFrame]) -> [ProtocolMessage] {
        var messages: [ProtocolMessage] = []
        var parts: [UInt8] = []
        for f in frames where f.opcode == 0x2 || f.opcode == 0x0 {
            parts += f.payload
            if f.fin {
                if let m = try? ProtocolCodec.decode(parts) { messages.append(m) }
                parts = []
            }
        }
        return messages
    }

    /// The close frame's code, if the server sent one.
    static func closeCode(_ frames: [ServerFrame]) -> UInt16? {
        guard let close = frames.first(where: { $0.opcode == 0x8 }), close.payload.count >= 2 else { return nil }
        return UInt16(close.payload[0]) << 8 | UInt16(close.payload[1])
    }
}
