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

    /// Whether the host is this machine's loopback: `localhost`, an IPv4 address in
    /// 127.0.0.0/8, or `::1` (in any of its spellings, IPv4-mapped 127/8 included). Plain http
    /// to a loopback host never leaves the machine; to any other host it crosses a network
    /// where anyone on the path reads the tokens and data.
    public var isLoopback: Bool {
        host == "localhost" || Self.ipv4Loopback(host) || Self.ipv6Loopback(host)
    }

    /// A dotted quad (four decimal numbers 0-255) whose first number is 127.
    private static func ipv4Loopback(_ s: some StringProtocol) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
              parts.allSatisfy({ (Int($0) ?? 256) <= 255 }) else { return false }
        return Int(parts[0]) == 127
    }

    /// `::1`, also written out (`0:0:0:0:0:0:0:1`), or `::ffff:127.x.y.z`.
    private static func ipv6Loopback(_ s: String) -> Bool {
        guard s.contains(":"), !s.contains("%") else { return false }
        func groups(_ h: Substring) -> [Substring] { h.isEmpty ? [] : h.split(separator: ":", omittingEmptySubsequences: false) }
        // Expands "::" (at most one) into the missing zero groups; a trailing dotted quad is two groups.
        let head: [Substring], tail: [Substring], compressed: Bool
        if let gap = s.firstRange(of: "::") {
            guard s[gap.upperBound...].firstRange(of: "::") == nil else { return false }
            head = groups(s[..<gap.lowerBound])
            tail = groups(s[gap.upperBound...])
            compressed = true
        } else {
            head = groups(s[...])
            tail = []
            compressed = false
        }
        let quad = (tail.last ?? head.last).map { $0.contains(".") } ?? false
        let width = head.count + tail.count + (quad ? 1 : 0)
        guard compressed ? width < 8 : width == 8 else { return false }
        let full = head + Array(repeating: "0", count: 8 - width) + tail
        func zero(_ g: Substring) -> Bool { !g.isEmpty && g.count <= 4 && g.allSatisfy { $0 == "0" } }
        if quad {
            guard let last = full.last, ipv4Loopback(last) else { return false }
            return full.count == 7 && full[0..<5].allSatisfy(zero) && full[5].lowercased() == "ffff"
        }
        guard full.allSatisfy({ g in !g.isEmpty && g.count <= 4 && g.allSatisfy { $0.isHexDigit } }) else { return false }
        return full[0..<7].allSatisfy(zero) && Int(full[7], radix: 16) == 1
    }

    /// Whether this is a WebSocket URL (ws or wss).
    public var isWebSocket: Bool { scheme == "ws" || scheme == "wss" }

    /// The Host header: the port only when it is not the scheme's default.
    public var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }
}
