import FerryCore

/// Where a request goes, parsed from an http, https, ws or wss URL. Only what Ferry needs:
/// no user info, no percent-decoding (the path is sent as given), IPv6 hosts in brackets.
public struct Endpoint: Sendable, Equatable {
    public var scheme: String
    /// Lowercased; an IPv6 address without its brackets.
    public var host: String
    public var port: Int
    /// Starts with "/"; "/" when the URL has no path.
    public var pathAndQuery: String
    /// https or wss.
    public var isSecure: Bool

    public init(parsing url: String) throws(FerryError) {
        func invalid(_ why: String) -> FerryError { FerryError(.invalidArgument, "invalid URL \"\(url)\": \(why)") }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { throw invalid("spaces or control characters") }
        guard let schemeEnd = url.firstRange(of: "://") else { throw invalid("no scheme") }
        scheme = url[..<schemeEnd.lowerBound].lowercased()
        switch scheme {
        case "http", "ws": isSecure = false
        case "https", "wss": isSecure = true
        default: throw invalid("scheme must be http, https, ws or wss")
        }
        var rest = url[schemeEnd.upperBound...]
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let path = String(rest[authorityEnd...])
        pathAndQuery = path.isEmpty ? "/" : path.hasPrefix("?") ? "/" + path : path
        guard !authority.contains("@") else { throw invalid("user information is not supported") }

        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw invalid("unterminated IPv6 address") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("junk after the IPv6 address") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = String(authority[..<colon])
            portText = authority[authority.index(after: colon)...]
        } else {
            host = String(authority)
        }
        host = host.lowercased()
        guard !host.isEmpty else { throw invalid("no host") }
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let value = Int(portText), value > 0, value <= 65535
            else { throw invalid("bad port") }
            port = value
        } else {
            port = isSecure ? 443 : 80
        }
    }

    /// Whether this is a WebSocket URL (ws or wss).
    public var isWebSocket: Bool { scheme == "ws" || scheme == "wss" }

    /// The Host header: the port only when it is not the scheme's default.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }
}
