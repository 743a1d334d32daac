import COpenSSL

/// The opening handshake's key and its expected answer (RFC 6455 §4.1): a random 16-byte nonce
/// in base64, and base64(SHA-1(key + GUID)), computed with OpenSSL.
enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    static func makeKey() -> String {
        base64(randomBytes(16))
    }

    static func expectedAccept(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: Int(SHA_DIGEST_LENGTH))
        input.withUnsafeBufferPointer { inputBuffer in
            digest.withUnsafeMutableBufferPointer { out in
                _ = SHA1(inputBuffer.baseAddress, inputBuffer.count, out.baseAddress)
            }
        }
        return base64(digest)
    }

    /// Cryptographically random bytes (masking keys must not be predictable, §10.3).
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        if RAND_bytes(&bytes, Int32(count)) != 1 {
            // RAND_bytes fails only without entropy; a fallback keeps the connection usable.
            for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        }
        return bytes
    }

    static func maskingKey() -> (UInt8, UInt8, UInt8, UInt8) {
        let b = randomBytes(4)
        return (b[0], b[1], b[2], b[3])
    }

    static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = UInt32(bytes[i])
            let b1 = i + 1 < bytes.count ? UInt32(bytes[i + 1]) : 0
            let b2 = i + 2 < bytes.count ? UInt32(bytes[i + 2]) : 0
            let triple = b0 << 16 | b1 << 8 | b2
            out.append(alphabet[Int(triple >> 18 & 63)])
            out.append(alphabet[Int(triple >> 12 & 63)])
            out.append(i + 1 < bytes.count ? alphabet[Int(triple >> 6 & 63)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(triple & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
