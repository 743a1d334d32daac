import FerryAuth
import Hummingbird
import NIOCore

/// The request context of the server's HTTP routes: Hummingbird's basic one plus the client's
/// address, which the authentication limits key on (`ClientAddress`): the TCP peer's, or, for
/// a request from a trusted reverse proxy, the one its header names (`TrustedProxies`).
struct ServerRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    /// Set by `ClientAddressMiddleware` for a request from a trusted proxy.
    var forwardedClientAddress: ClientAddress?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// Nil only where there is no peer (in-process router tests).
    var clientAddress: ClientAddress? { forwardedClientAddress ?? remoteAddress.map(Self.clientAddress) }

    /// An IPv4 address as it is; an IPv6 one cut to its /64, or as IPv4 when it is IPv4-mapped;
    /// a Unix socket peer is local like loopback.
    static func clientAddress(_ address: SocketAddress) -> ClientAddress {
        switch address {
        case .v4:
            let ip = address.ipAddress ?? "?"
            return ClientAddress(key: ip, isLoopback: ip.hasPrefix("127."))
        case .v6(let a):
            let bytes = withUnsafeBytes(of: a.address.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                let ip = bytes[12...].map(String.init).joined(separator: ".")
                return ClientAddress(key: ip, isLoopback: bytes[12] == 127)
            }
            let isLoopback = bytes[0..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return ClientAddress(key: isLoopback ? "::1" : groups.joined(separator: ":") + "::/64", isLoopback: isLoopback)
        case .unixDomainSocket:
            return ClientAddress(key: "unix", isLoopback: true)
        }
    }
}
