/// Builds WebSocket frames (RFC 6455 §5.2). Self-contained (no imports) so the fuzz build can
/// check that what it encodes decodes back.
public enum WebSocketFrameEncoder {
    /// One frame. A client masks every frame it sends (§5.3) with a fresh random `maskingKey`;
    /// a server passes nil.
    public static func frame(_ opcode: WebSocketOpcode, payload: ArraySlice<UInt8>, isFinal: Bool = true,
                             maskingKey: (UInt8, UInt8, UInt8, UInt8)?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + 14)
        out.append((isFinal ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskingKey == nil ? 0 : 0x80
        let count = payload.count
        if count < 126 {
            out.append(maskBit | UInt8(count))
        } else if count <= 0xFFFF {
            out.append(maskBit | 126)
            out.append(UInt8(count >> 8))
            out.append(UInt8(count & 0xFF))
        } else {
            out.append(maskBit | 127)
            let length = UInt64(count)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: length >> UInt64(shift))) }
        }
        guard let (k0, k1, k2, k3) = maskingKey else {
            out.append(contentsOf: payload)
            return out
        }
        let key = [k0, k1, k2, k3]
        out.append(contentsOf: key)
        let start = out.count
        out.append(contentsOf: payload)
        out.withUnsafeMutableBufferPointer { p in
            for i in 0..<count { p[start + i] ^= key[i & 3] }
        }
        return out
    }

    /// A data message split into frames of at most `maxFrameSize` payload bytes; many servers
    /// (Hummingbird's default is 16 KiB) refuse larger frames even when they accept the message.
    public static func message(_ opcode: WebSocketOpcode, payload: [UInt8], maxFrameSize: Int,
                               maskingKey: () -> (UInt8, UInt8, UInt8, UInt8)?) -> [UInt8] {
        let size = max(1, maxFrameSize)
        if payload.count <= size {
            return frame(opcode, payload: payload[...], maskingKey: maskingKey())
        }
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + (payload.count / size + 1) * 14)
        var start = 0
        while start < payload.count {
            let end = min(payload.count, start + size)
            out += frame(start == 0 ? opcode : .continuation, payload: payload[start..<end],
                         isFinal: end == payload.count, maskingKey: maskingKey())
            start = end
        }
        return out
    }

    /// The body of a close frame: the status code, then a reason cut to fit 125 bytes.
    public static func closePayload(code: UInt16, reason: [UInt8] = []) -> [UInt8] {
        [UInt8(code >> 8), UInt8(code & 0xFF)] + reason.prefix(123)
    }
}
