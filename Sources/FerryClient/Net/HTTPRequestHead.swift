import FerryCore

/// The bytes of a request line and header section, shared by `HTTPClient` and the WebSocket
/// upgrade. Names and values are checked, because a CR or LF in a caller's header would let it
/// inject headers or a second request.
enum HTTPRequestHead {
    /// Headers the client writes itself; a caller's copies are dropped.
    static let managed: Set<String> = ["host", "content-length", "connection", "transfer-encoding"]

    static func encode(method: String, endpoint: Endpoint, headers: [(String, String)],
                       contentLength: Int?, connection: String) throws(FerryError) -> [UInt8] {
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else {
            throw FerryError(.invalidArgument, "invalid HTTP method \"\(method)\"")
        }
        var text = "\(method) \(endpoint.pathAndQuery) HTTP/1.1\r\nHost: \(endpoint.hostHeader)\r\n"
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte) else {
                throw FerryError(.invalidArgument, "invalid HTTP header name \"\(name)\"")
            }
            guard !value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else {
                throw FerryError(.invalidArgument, "control character in the value of HTTP header \(name)")
            }
            if managed.contains(name.lowercased()) { continue }
            text += "\(name): \(value)\r\n"
        }
        if let contentLength { text += "Content-Length: \(contentLength)\r\n" }
        text += "Connection: \(connection)\r\n\r\n"
        return Array(text.utf8)
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
