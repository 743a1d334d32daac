import FerryAuth
import Foundation
import JWTKit
import Testing

/// Issue 22, point 8: a custom token's `nbf`, `iat` and `iss` are checked (the issuer when the
/// provider names one), and a token without `aud` is refused when an audience is configured.
@Suite("Custom JWT claims")
struct CustomJWTClaimsTests {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var aud: AudienceClaim?
        var nbf: NotBeforeClaim?
        var iat: IssuedAtClaim?
        var iss: IssuerClaim?
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    static let secret = "jwtSigningKey-value-0123456789abcdef"
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    func token(aud: [String]? = ["item-app"], nbf: TimeInterval? = nil, iat: TimeInterval? = nil, iss: String? = nil) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: Self.secret), digestAlgorithm: .sha256)
        return try await keys.sign(Claims(sub: SubjectClaim(value: "u"), exp: ExpirationClaim(value: Self.now.addingTimeInterval(300)),
                                          aud: aud.map { AudienceClaim(value: $0) }, nbf: nbf.map { NotBeforeClaim(value: Self.now.addingTimeInterval($0)) },
                                          iat: iat.map { IssuedAtClaim(value: Self.now.addingTimeInterval($0)) }, iss: iss.map { IssuerClaim(value: $0) }))
    }

    func verifier(issuer: String? = nil) async throws -> CustomJWTVerifier {
        try await CustomJWTVerifier(key: .hs256(secret: Array(Self.secret.utf8)), audiences: ["item-app"], issuer: issuer, now: { Self.now })
    }

    @Test func notBeforeAndIssuedAtAreChecked() async throws {
        let v = try await verifier()
        #expect(try await v.verify(try await token(nbf: -10, iat: -10)).subject == "u")
        #expect(try await v.verify(try await token(nbf: 30, iat: 30)).subject == "u", "within the clock skew")
        await #expect(throws: AuthError.self) { try await v.verify(try await token(nbf: 3_600)) }
        await #expect(throws: AuthError.self) { try await v.verify(try await token(iat: 3_600)) }
    }

    @Test func theIssuerIsCheckedWhenConfigured() async throws {
        let v = try await verifier(issuer: "https://id.example.com")
        #expect(try await v.verify(try await token(iss: "https://id.example.com")).subject == "u")
        await #expect(throws: AuthError.self) { try await v.verify(try await token(iss: "https://evil.example.com")) }
        await #expect(throws: AuthError.self) { try await v.verify(try await token(iss: nil)) }
        // Without a configured issuer, any (or none) is accepted.
        #expect(try await verifier().verify(try await token(iss: "anyone")).subject == "u")
    }

    @Test func aTokenWithoutAudienceIsRefusedWhenOneIsConfigured() async throws {
        await #expect(throws: AuthError.self) { try await verifier().verify(try await token(aud: nil)) }
    }
}
