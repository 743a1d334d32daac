import FerryCore
import Foundation
import JWTKit

/// The claims of a token issued by the host's own identity provider (the custom JWT
/// provider): `sub` is the user's id there; other claims may become user metadata.
struct HostTokenClaims: JWTPayload {
    var sub: String
    var exp: Date
    var aud: [String]
    /// Absent when the token has none (each is checked only when present, or configured).
    var iss: String?
    var nbf: Date?
    var iat: Date?
    /// Whether the token has an `aud` claim that is a string or a list of strings.
    var hasAudience: Bool
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
        let audKey = Key(stringValue: "aud")
        // `aud` is a string or a list of strings: each `try?` asks which (neither: no audience).
        if let one = try? c.decode(String.self, forKey: audKey) { aud = [one]; hasAudience = true }
        else if let list = try? c.decode([String].self, forKey: audKey) { aud = list; hasAudience = true }
        else { aud = []; hasAudience = false }
        // A claim of the wrong type is a malformed token, not an absent claim.
        func date(_ name: String) throws -> Date? {
            let key = Key(stringValue: name)
            guard c.contains(key) else { return nil }
            return Date(timeIntervalSince1970: try c.decode(Double.self, forKey: key))
        }
        nbf = try date("nbf")
        iat = try date("iat")
        let issKey = Key(stringValue: "iss")
        iss = c.contains(issKey) ? try c.decode(String.self, forKey: issKey) : nil
        var other: [String: FerryValue] = [:]
        for key in c.allKeys where !["sub", "exp", "aud", "iat", "nbf", "iss"].contains(key.stringValue) {
            // Each `try?` asks the claim's JSON kind; a claim of none of them is left out.
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
    /// The `iss` a token must name, when configured (the provider's `issuer`).
    private let issuer: String?
    /// How far a token's `nbf` and `iat` may be ahead of this server's clock (clock skew).
    static let leeway: TimeInterval = 60
    /// Claim name → metadata field name.
    private let metadataFields: [String: String]
    private let now: @Sendable () -> Date

    public init(key: Key, audiences: [String], requireAnyAudience: Bool = false, issuer: String? = nil, metadataFields: [String: String] = [:],
                now: @escaping @Sendable () -> Date = { Date() }) async throws {
        self.issuer = issuer
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
        let now = now()
        guard claims.exp > now else { throw AuthError.tokenExpired }
        // Issue 22, point 8: not yet valid, issued in the future, or from another issuer.
        if let nbf = claims.nbf, nbf > now.addingTimeInterval(Self.leeway) {
            throw AuthError.invalidToken("the custom token is not valid yet (nbf)")
        }
        if let iat = claims.iat, iat > now.addingTimeInterval(Self.leeway) {
            throw AuthError.invalidToken("the custom token was issued in the future (iat)")
        }
        if let issuer, claims.iss != issuer {
            throw AuthError.invalidToken("the custom token is not from this app's issuer")
        }
        if !audiences.isEmpty {
            guard claims.hasAudience else { throw AuthError.invalidToken("the custom token has no audience (aud), and this app requires one") }
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
