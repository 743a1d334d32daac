/// Follows the frames of a client's WebSocket byte stream (RFC 6455 section 5.2) without
/// keeping their payloads: enough for `ConnectionGuard` to refuse unmasked frames (section 5.1:
/// a server must close the connection on one) and to know when the client last completed a
/// frame. Hummingbird's WebSocket layer unmasks whatever it gets and tells neither.
struct WebSocketFrameScanner {
    struct Summary: Equatable {
        /// A frame header without the mask bit was seen.
        var unmasked = false
        /// Frames whose last byte was in the scanned bytes.
        var completedFrames = 0
    }

    /// The header bytes of the frame being read (at most 14), or nil while in a payload.
    private var header: [UInt8] = []
    private var payloadLeft: UInt64 = 0
    private var inPayload = false

    mutating func scan(_ bytes: some Collection<UInt8>) -> Summary {
        var summary = Summary()
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if inPayload {
                let available = UInt64(bytes.distance(from: index, to: bytes.endIndex))
                let taken = min(available, payloadLeft)
                index = bytes.index(index, offsetBy: Int(taken))
                payloadLeft -= taken
                if payloadLeft == 0 {
                    inPayload = false
                    summary.completedFrames += 1
                }
                continue
            }
            header.append(bytes[index])
            index = bytes.index(after: index)
            guard header.count >= 2 else { continue }
            let masked = header[1] & 0x80 != 0
            let length7 = header[1] & 0x7F
            let lengthBytes = length7 == 126 ? 2 : length7 == 127 ? 8 : 0
            guard header.count == 2 + lengthBytes + (masked ? 4 : 0) else { continue }
            if !masked { summary.unmasked = true }
            var length = UInt64(length7)
            if lengthBytes > 0 { length = header[2..<(2 + lengthBytes)].reduce(0) { $0 << 8 | UInt64($1) } }
            header.removeAll(keepingCapacity: true)
            if length == 0 {
                summary.completedFrames += 1
            } else {
                payloadLeft = length
                inPayload = true
            }
        }
        return summary
    }
}
