import NIOCore

/// A whole HTTP/1.1 response as bytes, for the answers written below Hummingbird's HTTP layer
/// (too many connections, a request head too slow, a refused sync upgrade): each closes the
/// connection, so it says so.
enum RawHTTPResponse {
    static func make(status: Int, reason: String, contentType: String = "text/plain; charset=utf-8", body: String,
                     headers: [(String, String)] = []) -> ByteBuffer {
        var text = "HTTP/1.1 \(status) \(reason)\r\nConnection: close\r\nContent-Type: \(contentType)\r\nContent-Length: \(body.utf8.count)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n" + body
        return ByteBuffer(string: text)
    }
}
