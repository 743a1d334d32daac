import Crypto
import Foundation
import Testing
@testable import FerryAuth

/// Issue 11 point 12: a token is refused when its header names another algorithm than the one
/// the server signs (access tokens) or the custom-token provider is configured with, even when
/// its signature is right for the configured key. JWTKit picks the key and checks the
/// signature, but never compares the header's `alg` with the key's algorithm.
@Suite("Authentication: JWT header algorithm")
struct JWTAlgorithmTests {
    static let serverSecret = "server-secret-for-tests-0123456789abcdef"
    static let hostSecret = "jwtSigningKey-value-0123456789abcdef"

    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A token with `header` and `payload` (base64url), signed with HMAC-SHA256 under `secret`
    /// whatever the header says.
    static func hs256Signed(header: String, payload: String, secret: String) -> String {
        let input = base64URL(Array(header.utf8)) + "." + payload
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return input + "." + base64URL(mac)
    }

    @Test func accessTokensNamingAnotherAlgorithmAreRefused() async throws {
        let tokens = try await TokenService(secret: Array(Self.serverSecret.utf8), appId: "item-app")
        let genuine = try await tokens.issueAccessToken(userId: "user-1")
        #expect(try await tokens.verifyAccessToken(genuine) == "user-1")
        let payload = String(genuine.split(separator: ".")[1])
        // The control: the same header as the server's, re-signed here, is accepted.
        let control = Self.hs256Signed(header: #"{"alg":"HS256","typ":"JWT"}"#, payload: payload, secret: Self.serverSecret)
        #expect(try await tokens.verifyAccessToken(control) == "user-1")
        for alg in ["none", "HS512", "RS256", "hs256"] {
            let token = Self.hs256Signed(header: #"{"alg":"\#(alg)","typ":"JWT"}"#, payload: payload, secret: Self.serverSecret)
            await #expect(throws: AuthError.invalidToken("the token's algorithm \(alg) is not HS256")) {
                try await tokens.verifyAccessToken(token)
            }
        }
        let noAlg = Self.hs256Signed(header: #"{"typ":"JWT"}"#, payload: payload, secret: Self.serverSecret)
        await #expect(throws: AuthError.self) { try await tokens.verifyAccessToken(noAlg) }
        // Two `alg` members: another reader of the header may take the other one (the header is
        // read with FerryCore's JSON parser, which keeps every member).
        for header in [#"{"alg":"HS256","alg":"none"}"#, #"{"alg":"none","alg":"HS256"}"#] {
            let twice = Self.hs256Signed(header: header, payload: payload, secret: Self.serverSecret)
            await #expect(throws: AuthError.invalidToken("the token has no readable header algorithm")) { try await tokens.verifyAccessToken(twice) }
        }
    }

    @Test func customTokensNamingAnotherAlgorithmThanConfiguredAreRefused() async throws {
        let verifier = try await CustomJWTVerifier(key: .hs256(secret: Array(Self.hostSecret.utf8)), audiences: ["item-app"])
        let claims = #"{"sub":"host-user","aud":["item-app"],"exp":\#(Int(Date().timeIntervalSince1970) + 300)}"#
        let payload = Self.base64URL(Array(claims.utf8))
        let control = Self.hs256Signed(header: #"{"alg":"HS256","typ":"JWT"}"#, payload: payload, secret: Self.hostSecret)
        #expect(try await verifier.verify(control).subject == "host-user")
        for alg in ["none", "HS384", "RS256"] {
            let token = Self.hs256Signed(header: #"{"alg":"\#(alg)","typ":"JWT"}"#, payload: payload, secret: Self.hostSecret)
            await #expect(throws: AuthError.invalidToken("the custom token's algorithm \(alg) is not HS256")) {
                try await verifier.verify(token)
            }
        }
    }
}
