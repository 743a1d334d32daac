import Crypto
import Foundation
import JWTKit

/// The claims of Ferry's access tokens: short-lived JWTs (HS256 with the server's secret)
/// naming the user and the app.
struct AccessTokenClaims: JWTPayload {
    var sub: SubjectClaim
    var aud: AudienceClaim
    var exp: ExpirationClaim
    var iat: IssuedAtClaim

    func verify(using algorithm: some JWTAlgorithm) throws {
        // Expiry is checked by the service, against its own clock.
    }
}

/// Issues and checks access tokens, and makes refresh tokens (random, stored only hashed).
/// Immutable, so not an actor: token checks of sync connections never queue behind anything.
public final class TokenService: Sendable {
    private let keys = JWTKeyCollection()
    private let appId: String
    public let accessTokenLifetime: TimeInterval
    public let refreshTokenLifetime: TimeInterval
    private let now: @Sendable () -> Date

    /// `secret` signs access tokens; it comes from the server's configuration, never the app
    /// directory. `now` is injectable so tests can move time.
    /// The secret must have at least 32 bytes (an HS256 key shorter than its hash is refused).
    public init(secret: [UInt8], appId: String, accessTokenLifetime: TimeInterval = 30 * 60,
                refreshTokenLifetime: TimeInterval = 60 * 24 * 3600, now: @escaping @Sendable () -> Date = { Date() }) async throws {
        guard secret.count >= 32 else { throw AuthError.invalidToken("the token signing secret must have at least 32 bytes") }
        self.appId = appId
        self.accessTokenLifetime = accessTokenLifetime
        self.refreshTokenLifetime = refreshTokenLifetime
        self.now = now
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
    }

    public func issueAccessToken(userId: String) async throws -> String {
        let t = now()
        return try await keys.sign(AccessTokenClaims(sub: SubjectClaim(value: userId), aud: AudienceClaim(value: [appId]),
                                                     exp: ExpirationClaim(value: t.addingTimeInterval(accessTokenLifetime)),
                                                     iat: IssuedAtClaim(value: t)))
    }

    /// The algorithm access tokens are signed with; a token whose header names another is refused.
    public static let algorithm = "HS256"

    /// The user id of a valid access token for this app.
    public func verifyAccessToken(_ token: String) async throws -> String { try await verifiedAccessToken(token).userId }

    /// The user id of a valid access token for this app, and when it was issued.
    public func verifiedAccessToken(_ token: String) async throws -> (userId: String, issuedAt: Date) {
        try JWTHeader.require(Self.algorithm, in: token, what: "the token")
        let claims: AccessTokenClaims
        do { claims = try await keys.verify(token, as: AccessTokenClaims.self) } catch {
            throw AuthError.invalidToken("signature or format")
        }
        guard claims.aud.value.contains(appId) else { throw AuthError.invalidToken("issued for another app") }
        guard claims.exp.value > now() else { throw AuthError.tokenExpired }
        return (claims.sub.value, claims.iat.value)
    }

    /// A new refresh token and the hash to store (the token itself is never stored).
    public func newRefreshToken() -> (token: String, hash: String) {
        var bytes = [UInt8](repeating: 0, count: 32)
        var g = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255, using: &g) }
        let token = Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return (token, Self.hash(token))
    }

    public static func hash(_ refreshToken: String) -> String {
        SHA256.hash(data: Array(refreshToken.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    public func refreshExpiry(from date: Date) -> Date { date.addingTimeInterval(refreshTokenLifetime) }
    public var currentDate: Date { now() }
}
