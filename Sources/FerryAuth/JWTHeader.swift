import FerryCore
import Foundation

/// The header of a compact JWT, read before JWTKit verifies the token. JWTKit picks the key
/// and checks the signature with the key's own algorithm but never compares it with the
/// header's `alg`, so a token saying `none` (or any other algorithm) was accepted as long as
/// the signature was right; RFC 8725 (section 3.1) asks verifiers to allow exactly the
/// algorithms they expect.
enum JWTHeader {
    /// The `alg` of the token's header; nil when the header is not base64url JSON with a string `alg`.
    static func algorithm(of token: String) -> String? {
        guard let end = token.firstIndex(of: "."), token.distance(from: token.startIndex, to: end) <= 4096 else { return nil }
        var text = token[..<end].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        guard let data = Data(base64Encoded: text),
              // A header that is not a JSON object makes the token unreadable: nil is that answer.
              let header = try? JSON.parse(Array(data)), case .object(let members) = header else { return nil }
        // Two `alg` members are ambiguous (another reader may take the other one): unreadable.
        let algs = members.filter { $0.0 == "alg" }
        guard algs.count == 1 else { return nil }
        return algs[0].1.stringValue
    }

    /// Throws `invalidToken` unless the header names exactly `expected`. `what` names the token
    /// in the message (e.g. "the custom token").
    static func require(_ expected: String, in token: String, what: String) throws {
        guard let alg = algorithm(of: token) else { throw AuthError.invalidToken("\(what) has no readable header algorithm") }
        guard alg == expected else { throw AuthError.invalidToken("\(what)'s algorithm \(alg) is not \(expected)") }
    }
}
