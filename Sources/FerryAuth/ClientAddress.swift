/// Where a request comes from, as the per-address limits see it: an IPv4 address, or the /64
/// network of an IPv6 one (what one subscriber gets, so hopping within it does not escape).
public struct ClientAddress: Hashable, Sendable, CustomStringConvertible {
    /// The rate-limit key, e.g. `203.0.113.7` or `2001:db8:1:2::/64`.
    public let key: String
    /// Loopback clients are exempt from the per-address limits unless `AuthLimits.limitLoopback`.
    public let isLoopback: Bool

    public init(key: String, isLoopback: Bool) {
        self.key = key
        self.isLoopback = isLoopback
    }

    public var description: String { key }
}
