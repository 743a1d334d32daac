import CryptoExtras
import FerryAppConfig
import FerryCore
import Foundation
import JWTKit
import Testing
@testable import FerryAuth

/// A clock tests can move.
final class TestClock: @unchecked Sendable {
    private let lock = ThreadLock()
    private var date = Date(timeIntervalSince1970: 1_800_000_000)
    var now: Date { lock.withLock { date } }
    func advance(_ seconds: TimeInterval) { lock.withLock { date = date.addingTimeInterval(seconds) } }
}

/// A token from the host's own identity provider.
struct HostToken: JWTPayload {
    var sub: SubjectClaim
    var exp: ExpirationClaim
    var aud: AudienceClaim
    var name: String?
    func verify(using algorithm: some JWTAlgorithm) throws {}
}

func providers(_ types: [String]) -> [AuthProviderConfiguration] {
    types.map { AuthProviderConfiguration(name: $0, type: $0, disabled: false, config: [:], secretNames: [:]) }
}

@Suite("Authentication")
struct AuthTests {
    let clock = TestClock()

    func service(_ types: [String] = ["anon-user", "local-userpass", "api-key"], customJWT: CustomJWTVerifier? = nil) async -> (AuthService, TokenService) {
        let c = clock
        let tokens = try! await TokenService(secret: Array("server-secret-for-tests-0123456789abcdef".utf8), appId: "item-app", accessTokenLifetime: 60, now: { c.now })
        return (AuthService(providers: providers(types), directory: InMemoryUserDirectory(), tokens: tokens,
                            hasher: PasswordHasher(parameters: .fastForTests), customJWT: customJWT), tokens)
    }

    @Test func passwordsAreHashedWithSaltAndVerified() throws {
        let hasher = PasswordHasher(parameters: .fastForTests)
        let a = try hasher.hash("correct horse"), b = try hasher.hash("correct horse")
        #expect(a != b)                       // salted
        #expect(a.hasPrefix("scrypt$1024$8$1$"))
        #expect(try hasher.verify("correct horse", against: a))
        #expect(try !hasher.verify("correct horsf", against: a))
        #expect(try !hasher.verify("correct horse", against: "scrypt$1$1$1$garbage$garbage"))
        #expect(try !hasher.verify("x", against: ""))
    }

    @Test func emailPasswordRegistrationAndLogin() async throws {
        let (auth, _) = await service()
        try await auth.register(email: "Alice@Example.com", password: "s3cret!")
        await #expect(throws: AuthError.emailAlreadyRegistered) { try await auth.register(email: "alice@example.com", password: "other-pw") }
        await #expect(throws: AuthError.passwordTooShort(minimum: 6)) { try await auth.register(email: "b@example.com", password: "123") }
        await #expect(throws: AuthError.invalidEmail("it needs a name, '@' and a domain")) { try await auth.register(email: "nobody", password: "123456") }
        let session = try await auth.login(email: "alice@example.com", password: "s3cret!")
        #expect(try await auth.authenticate(accessToken: session.accessToken).id == session.userId)
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "alice@example.com", password: "wrong") }
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(email: "eve@example.com", password: "s3cret!") }
        // The same user every time.
        #expect(try await auth.login(email: "ALICE@example.com", password: "s3cret!").userId == session.userId)
    }

    @Test func accessTokensExpireAndRefreshTokensRenewThemUntilLogout() async throws {
        let (auth, _) = await service()
        let session = try await auth.loginAnonymous()
        clock.advance(61)
        await #expect(throws: AuthError.tokenExpired) { try await auth.authenticate(accessToken: session.accessToken) }
        let renewed = try await auth.refresh(refreshToken: session.refreshToken)
        #expect(try await auth.authenticate(accessToken: renewed).id == session.userId)
        try await auth.logout(refreshToken: session.refreshToken)
        await #expect(throws: AuthError.invalidRefreshToken) { try await auth.refresh(refreshToken: session.refreshToken) }
        await #expect(throws: AuthError.invalidRefreshToken) { try await auth.refresh(refreshToken: "made-up") }
    }

    @Test func forgedAndForeignTokensAreRefused() async throws {
        let (auth, _) = await service()
        let session = try await auth.loginAnonymous()
        var parts = session.accessToken.split(separator: ".").map(String.init)
        parts[1] = parts[1].reversed().map(String.init).joined()
        await #expect(throws: AuthError.self) { try await auth.authenticate(accessToken: parts.joined(separator: ".")) }
        let other = try await TokenService(secret: Array("another-secret-0123456789abcdef-xyz".utf8), appId: "item-app")
        let foreign = try await other.issueAccessToken(userId: session.userId)
        await #expect(throws: AuthError.invalidToken("signature or format")) { try await auth.authenticate(accessToken: foreign) }
        await #expect(throws: AuthError.self) { try await auth.authenticate(accessToken: "not a jwt") }
    }

    @Test func shortSecretsAreRefused() async {
        await #expect(throws: AuthError.self) { try await TokenService(secret: Array("short".utf8), appId: "a") }
        await #expect(throws: AuthError.self) { try await CustomJWTVerifier(key: .hs256(secret: Array("short".utf8)), audiences: []) }
    }

    @Test func disabledProvidersRefuse() async throws {
        let (auth, _) = await service(["local-userpass"])
        await #expect(throws: AuthError.providerDisabled("anon-user")) { try await auth.loginAnonymous() }
        await #expect(throws: AuthError.providerDisabled("api-key")) { try await auth.login(apiKey: "k") }
    }

    @Test func apiKeys() async throws {
        let (auth, _) = await service()
        let user = try await auth.loginAnonymous()
        let key = try await auth.createAPIKey(userId: user.userId, name: "ci")
        #expect(try await auth.login(apiKey: key).userId == user.userId)
        await #expect(throws: AuthError.invalidCredentials) { try await auth.login(apiKey: key + "x") }
    }

    @Test func customJWTWithHS256() async throws {
        let c = clock
        let verifier = try await CustomJWTVerifier(key: .hs256(secret: Array("jwtSigningKey-value-0123456789abcdef".utf8)), audiences: ["item-app"],
                                                   metadataFields: ["name": "name"], now: { c.now })
        let (auth, _) = await service(["custom-token"], customJWT: verifier)
        let host = JWTKeyCollection()
        await host.add(hmac: HMACKey(from: "jwtSigningKey-value-0123456789abcdef"), digestAlgorithm: .sha256)
        func token(_ sub: String, aud: [String] = ["item-app"], expiresIn: TimeInterval = 300) async throws -> String {
            try await host.sign(HostToken(sub: SubjectClaim(value: sub), exp: ExpirationClaim(value: c.now.addingTimeInterval(expiresIn)),
                                          aud: AudienceClaim(value: aud), name: "Alice"))
        }
        let first = try await auth.login(customToken: try await token("host-user-1"))
        #expect(try await auth.login(customToken: try await token("host-user-1")).userId == first.userId)
        #expect(try await auth.authenticate(accessToken: first.accessToken).data["name"] == .string("Alice"))
        await #expect(throws: AuthError.self) { try await auth.login(customToken: try await token("host-user-1", aud: ["other-app"])) }
        await #expect(throws: AuthError.tokenExpired) { try await auth.login(customToken: try await token("host-user-1", expiresIn: -10)) }
        let forger = JWTKeyCollection()
        await forger.add(hmac: HMACKey(from: "guessed-0123456789abcdef-0123456789"), digestAlgorithm: .sha256)
        let forged = try await forger.sign(HostToken(sub: SubjectClaim(value: "host-user-1"), exp: ExpirationClaim(value: c.now.addingTimeInterval(300)),
                                                     aud: AudienceClaim(value: ["item-app"]), name: nil))
        await #expect(throws: AuthError.self) { try await auth.login(customToken: forged) }
    }

    @Test func customJWTWithRS256() async throws {
        let c = clock
        let privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let verifier = try await CustomJWTVerifier(key: .rs256(publicKeyPEM: privateKey.publicKey.pemRepresentation),
                                                   audiences: ["item-app"], now: { c.now })
        let (auth, _) = await service(["custom-token"], customJWT: verifier)
        let host = JWTKeyCollection()
        await host.add(rsa: try Insecure.RSA.PrivateKey(backing: privateKey), digestAlgorithm: .sha256)
        let token = try await host.sign(HostToken(sub: SubjectClaim(value: "rsa-user"), exp: ExpirationClaim(value: c.now.addingTimeInterval(60)),
                                                  aud: AudienceClaim(value: ["item-app"]), name: nil))
        #expect(try await auth.login(customToken: token).userId.isEmpty == false)
    }
}
