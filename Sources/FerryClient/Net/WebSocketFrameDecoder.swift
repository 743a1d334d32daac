/// An incremental WebSocket frame decoder (RFC 6455 §5): feed it bytes as they arrive, get whole
/// messages (fragments reassembled) and control frames back. It does no I/O and imports nothing,
/// so the fuzz build compiles it alone (`fuzz/targets/websocket.swift`).
///
/// Hostile input ends in a `ProtocolError` carrying the close code to send, never in a trap:
/// the declared length of a frame is checked against `maxMessageSize` before any of its payload
/// is buffered, so a peer cannot make the decoder hold more than that.
public struct WebSocketFrameDecoder: Sendable {
    public enum Event: Sendable, Equatable {
        /// A complete data message; `opcode` is `.binary` or `.text` (text is not UTF-8 checked).
        case message(opcode: WebSocketOpcode, payload: [UInt8])
        case ping([UInt8])
        case pong([UInt8])
        /// The peer's close frame; `code` is nil when the frame had no body. Nothing is decoded after it.
        case close(code: UInt16?, reason: [UInt8])
    }

    public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        /// The status code to close the connection with: 1002 (protocol error) or 1009 (too big).
        public let closeCode: UInt16
        public init(_ message: String, closeCode: UInt16 = 1002) {
            self.message = message
            self.closeCode = closeCode
        }
        public var description: String { message }
    }

    public let maxMessageSize: Int
    /// A server expects masked frames from clients; a client expects unmasked frames (§5.1).
    public let expectsMaskedFrames: Bool

    private var buffer: [UInt8] = []
    private var position = 0
    private var fragments: [UInt8] = []
    private var fragmentedOpcode: WebSocketOpcode?
    private var sawClose = false
    private var failure: ProtocolError?

    public init(maxMessageSize: Int, expectsMaskedFrames: Bool = false) {
        self.maxMessageSize = max(0, maxMessageSize)
        self.expectsMaskedFrames = expectsMaskedFrames
    }

    /// Decodes `bytes` and returns the events they complete. After an error every call throws it
    /// again; after a close frame, further bytes are ignored.
    public mutating func feed(_ bytes: [UInt8]) throws(ProtocolError) -> [Event] {
        if let failure { throw failure }
        if sawClose { return [] }
        buffer.append(contentsOf: bytes)
        var events: [Event] = []
        do {
            while !sawClose, let event = try nextFrame() {
                if let event { events.append(event) }
            }
        } catch {
            failure = error
            buffer = []
            position = 0
            throw error
        }
        if sawClose {
            buffer = []
            position = 0
        } else if position > 0 {
            buffer.removeSubrange(0..<position)
            position = 0
        }
        return events
    }

    /// Decodes one frame: nil when more bytes are needed, `.some(nil)` for a frame that completes
    /// no event (a non-final fragment).
    private mutating func nextFrame() throws(ProtocolError) -> Event?? {
        let available = buffer.count - position
        guard available >= 2 else { return nil }
        let first = buffer[position], second = buffer[position + 1]
        let isFinal = first & 0x80 != 0
        guard first & 0x70 == 0 else { throw ProtocolError("reserved bits set without a negotiated extension") }
        guard let opcode = WebSocketOpcode(rawValue: first & 0x0F) else {
            throw ProtocolError("unknown opcode \(first & 0x0F)")
        }
        let isMasked = second & 0x80 != 0
        guard isMasked == expectsMaskedFrames else {
            throw ProtocolError(isMasked ? "masked frame from a server" : "unmasked frame from a client")
        }
        let shortLength = second & 0x7F
        let lengthBytes = shortLength == 126 ? 2 : shortLength == 127 ? 8 : 0
        let headerLength = 2 + lengthBytes + (isMasked ? 4 : 0)
        guard available >= headerLength else { return nil }
        var length = UInt64(shortLength)
        if lengthBytes > 0 {
            length = 0
            for i in 0..<lengthBytes { length = length << 8 | UInt64(buffer[position + 2 + i]) }
            guard length >> 63 == 0 else { throw ProtocolError("frame length has its top bit set") }
        }

        if opcode.isControl {
            guard isFinal else { throw ProtocolError("fragmented control frame") }
            guard length <= 125 else { throw ProtocolError("control frame longer than 125 bytes") }
        } else if opcode == .continuation {
            guard fragmentedOpcode != nil else { throw ProtocolError("continuation frame without a message to continue") }
        } else {
            guard fragmentedOpcode == nil else { throw ProtocolError("new message before the previous one was finished") }
        }
        if !opcode.isControl {
            // Checked before buffering the payload, so a declared length cannot make us hold more.
            let room = UInt64(maxMessageSize - fragments.count)
            guard length <= room else {
                throw ProtocolError("message larger than \(maxMessageSize) bytes", closeCode: 1009)
            }
        }
        // length <= maxMessageSize (an Int) or <= 125 here, so the conversion cannot trap.
        let payloadLength = Int(length)
        guard available - headerLength >= payloadLength else { return nil }

        let payloadStart = position + headerLength
        var payload = Array(buffer[payloadStart..<(payloadStart + payloadLength)])
        if isMasked {
            let key = Array(buffer[(payloadStart - 4)..<payloadStart])
            payload.withUnsafeMutableBufferPointer { p in
                for i in p.indices { p[i] ^= key[i & 3] }
            }
        }
        position = payloadStart + payloadLength

        switch opcode {
        case .ping:
            return .some(.ping(payload))
        case .pong:
            return .some(.pong(payload))
        case .close:
            sawClose = true
            return .some(try Self.closeEvent(payload))
        case .continuation, .text, .binary:
            if opcode != .continuation { fragmentedOpcode = opcode }
            if isFinal && fragments.isEmpty {
                let messageOpcode = fragmentedOpcode ?? opcode
                fragmentedOpcode = nil
                return .some(.message(opcode: messageOpcode, payload: payload))
            }
            fragments.append(contentsOf: payload)
            guard isFinal else { return .some(nil) }
            let message = fragments
            let messageOpcode = fragmentedOpcode ?? opcode
            fragments = []
            fragmentedOpcode = nil
            return .some(.message(opcode: messageOpcode, payload: message))
        }
    }

    private static func closeEvent(_ payload: [UInt8]) throws(ProtocolError) -> Event {
        if payload.isEmpty { return .close(code: nil, reason: []) }
        guard payload.count >= 2 else { throw ProtocolError("close frame with a one-byte body") }
        let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: break
        default: throw ProtocolError("invalid close code \(code)")
        }
        return .close(code: code, reason: Array(payload[2...]))
    }
}
