import FerryCore
import Foundation
import JWTKit

/// The claims of a token issued by the host's own identity provider (the custom JWT
/// provider): `sub` is the user's id there; other claims may become user metadata.
struct HostTokenClaims: JWTPayload {
    var sub: String
    var exp: Date
    var aud: [String]
    var other: [String: FerryValue]

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        sub = try c.decode(String.self, forKey: Key(stringValue: "sub"))
        let expSeconds = try c.decode(Double.self, forKey: Key(stringValue: "exp"))
        exp = Date(timeIntervalSince1970: expSeconds)
        if let one = try? c.decode(String.self, forKey: Key(stringValue: "aud")) { aud = [one] }
        else { aud = (try? c.decode([String].self, forKey: Key(stringValue: "aud"))) ?? [] }
        var other: [String: FerryValue] = [:]
        for key in c.allKeys where !["sub", "exp", "aud", "iat", "nbf", "iss"].contains(key.stringValue) {
            if let s = try? c.decode(String.self, forKey: key) { other[key.stringValue] = .string(s) }
            else if let b = try? c.decode(Bool.self, forKey: key) { other[key.stringValue] = .bool(b) }
            else if let i = try? c.decode(Int64.self, forKey: key) { other[key.stringValue] = .int(i) }
            else if let d = try? c.decode(Double.self, forKey: key) { other[key.stringValue] = .double(d) }
        }
        self.other = other
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(sub, forKey: Key(stringValue: "sub"))
        try c.encode(exp.timeIntervalSince1970, forKey: Key(stringValue: "exp"))
        try c.encode(aud, forKey: Key(stringValue: "aud"))
    }

    func verify(using algorithm: some JWTAlgorithm) throws {}
}

/// Verifies tokens from the host's identity provider, as the `custom-token` provider's config
/// says: HS256 with a shared secret or RS256 with the provider's public key, the audience,
/// and which claims become user metadata (`%%user.data.<name>`).
public actor CustomJWTVerifier {
    public enum Key: Sendable {
        case hs256(secret: [UInt8])
        case rs256(publicKeyPEM: String)

        /// The `alg` a token signed with this key names in its header.
        public var algorithm: String {
            switch self {
            case .hs256: return "HS256"
            case .rs256: return "RS256"
            }
        }
    }

    private let keys = JWTKeyCollection()
    /// `HS256` or `RS256`, as configured: a token whose header names another is refused.
    private let algorithm: String
    private let audiences: [String]
    private let requireAnyAudience: Bool
    /// Claim name → metadata field name.
    private let metadataFields: [String: String]
    private let now: @Sendable () -> Date

    public init(key: Key, audiences: [String], requireAnyAudience: Bool = false, metadataFields: [String: String] = [:],
                now: @escaping @Sendable () -> Date = { Date() }) async throws {
        self.audiences = audiences
        self.requireAnyAudience = requireAnyAudience
        self.metadataFields = metadataFields
        self.now = now
        algorithm = key.algorithm
        switch key {
        case .hs256(let secret):
            // As App Services required: 32 to 512 characters.
            guard secret.count >= 32 && secret.count <= 512 else {
                throw AuthError.invalidToken("the custom token signing key must have 32 to 512 bytes")
            }
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        case .rs256(let pem): await keys.add(rsa: try Insecure.RSA.PublicKey(pem: pem), digestAlgorithm: .sha256)
        }
    }

    /// The host's user id and the metadata of a valid token.
    public func verify(_ token: String) async throws -> (subject: String, metadata: [String: FerryValue]) {
        try JWTHeader.require(algorithm, in: token, what: "the custom token")
        let claims: HostTokenClaims
        do { claims = try await keys.verify(token, as: HostTokenClaims.self) } catch {
            throw AuthError.invalidToken("the custom token's signature or format is invalid")
        }
        guard claims.exp > now() else { throw AuthError.tokenExpired }
        if !audiences.isEmpty {
            // App Services: with requireAnyAudience one listed audience suffices, else all are needed.
            let ok = requireAnyAudience ? claims.aud.contains(where: audiences.contains) : Set(audiences).isSubset(of: Set(claims.aud))
            guard ok else {
                throw AuthError.invalidToken("the custom token is not for this app's audience")
            }
        }
        guard !claims.sub.isEmpty else { throw AuthError.invalidToken("the custom token has no subject") }
        var metadata: [String: FerryValue] = [:]
        for (claim, field) in metadataFields { if let v = claims.other[claim] { metadata[field] = v } }
        return (claims.sub, metadata)
    }
}
