import FerryAuth
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Which reverse proxies may say who the client is, and in which header
/// (`--trusted-proxy`, `--client-address-header`; docs/server-config.md, "Authentication
/// limits"). Behind a proxy every connection comes from the proxy, so without this the
/// per-address limits would key every client on the proxy's address (loopback, exempt, for a
/// proxy on the same host).
///
/// A request whose TCP peer is one of `proxies` is attributed to the address the header names:
/// for a list (`X-Forwarded-For: client, proxy1, proxy2`, each proxy appending the address it
/// was reached from) the rightmost entry that is not itself a trusted proxy, since everything
/// left of it may have been written by the client. A request from any other peer is
/// attributed to the peer, whatever its headers say.
public struct TrustedProxies: Sendable {
    /// The header carrying the client's address: `X-Forwarded-For` (a comma-separated list),
    /// or one with a single address such as `X-Real-IP`.
    public var header: String
    public var proxies: [IPNetwork]

    /// `proxies`: addresses or CIDR networks (`127.0.0.1`, `10.0.0.0/8`, `::1`, `fd00::/8`).
    public init(header: String = "X-Forwarded-For", proxies: [String]) throws {
        guard !header.isEmpty, HTTPField.Name(header) != nil else {
            throw ServerStartError("'\(header)' is not a valid HTTP header name (--client-address-header)")
        }
        self.header = header
        self.proxies = try proxies.map { text in
            guard let network = IPNetwork(text) else {
                throw ServerStartError("'\(text)' is not an IP address or network (--trusted-proxy): give e.g. 127.0.0.1, ::1 or 10.0.0.0/8")
            }
            return network
        }
    }

    func isTrusted(_ address: [UInt8]) -> Bool { proxies.contains { $0.contains(address) } }

    /// The client's address for a request from `peer` with these values of the header; nil
    /// when the peer is not a trusted proxy or the header is absent (then the peer is the client).
    func clientAddress(peer: SocketAddress?, headerValues: [String]) -> ClientAddress? {
        guard let peer, let bytes = IPNetwork.bytes(of: peer), isTrusted(bytes) else { return nil }
        let entries = headerValues.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        var chosen: SocketAddress?
        for entry in entries.reversed() {
            // A proxy that writes something else than an address is misconfigured: its clients
            // share one key rather than escaping the limits (or taking the exempt loopback's).
            guard let address = IPNetwork.socketAddress(entry) else { return ClientAddress(key: "unparseable", isLoopback: false) }
            chosen = address
            if let b = IPNetwork.bytes(of: address), isTrusted(b) { continue }
            break
        }
        return chosen.map(ServerRequestContext.clientAddress)
    }
}

/// An IPv4 or IPv6 network: an address and a prefix length.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 (IPv6).
    public let address: [UInt8]
    public let prefixLength: Int

    /// `a.b.c.d`, `a.b.c.d/n`, an IPv6 address, or one with `/n`.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let socket = Self.socketAddress(String(parts[0])), let bytes = Self.bytes(of: socket) else { return nil }
        let bits = bytes.count * 8
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...bits).contains(n) else { return nil }
            prefixLength = n
        } else {
            prefixLength = bits
        }
        address = bytes
    }

    public var description: String { "\(address.count == 4 ? address.map(String.init).joined(separator: ".") : "\(address)")/\(prefixLength)" }

    func contains(_ other: [UInt8]) -> Bool {
        guard other.count == address.count else { return false }
        var bits = prefixLength
        for (a, b) in zip(address, other) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
            if a & mask != b & mask { return false }
            bits -= 8
        }
        return true
    }

    /// The address's bytes: 4 for IPv4 (an IPv4-mapped IPv6 address too), 16 for IPv6.
    static func bytes(of address: SocketAddress) -> [UInt8]? {
        switch address {
        case .v4(let a): return withUnsafeBytes(of: a.address.sin_addr) { Array($0) }
        case .v6(let a):
            let bytes = withUnsafeBytes(of: a.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff { return Array(bytes[12...]) }
            return bytes
        case .unixDomainSocket: return nil
        }
    }

    /// An address as a header or a flag gives it: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`,
    /// `[2001:db8::1]` or `[2001:db8::1]:443`.
    static func socketAddress(_ text: String) -> SocketAddress? {
        var host = Substring(text)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            host = host[host.index(after: host.startIndex)..<close]
        } else if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") {
            host = host[..<colon]
        }
        // Not an IP address: nil is the answer, not a lost error.
        return try? SocketAddress(ipAddress: String(host), port: 0)
    }
}

/// Attributes each request to the client a trusted proxy names (`TrustedProxies`), for the
/// per-address limits of logins, sign-ups and the admin API.
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    let proxies: TrustedProxies
    let header: HTTPField.Name

    init(_ proxies: TrustedProxies) {
        self.proxies = proxies
        // Checked in TrustedProxies.init.
        header = HTTPField.Name(proxies.header) ?? HTTPField.Name("X-Forwarded-For")!
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.forwardedClientAddress = proxies.clientAddress(peer: context.remoteAddress, headerValues: request.headers[values: header])
        return try await next(request, context)
    }
}
