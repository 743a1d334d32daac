import FerryAppConfig
import HTTPTypes
import Hummingbird

/// The Data API's server keys with their secrets, resolved at start from the server's
/// secrets (the environment). A declared key whose secret is missing or shorter than 32 bytes
/// stops the server from starting: a backend's key runs as the system, past every rule.
struct DataAPIKeys: Sendable {
    static let minimumBytes = 32
    /// The Atlas Data API's header for a key.
    static let header = HTTPField.Name("apiKey")!

    struct Key: Sendable {
        let name: String
        let secret: [UInt8]
    }
    let keys: [Key]
    let enabled: Bool

    init(_ config: DataAPIConfiguration, secrets: [String: String]) throws {
        enabled = !config.disabled
        keys = try config.serverKeys.map { k in
            guard let value = secrets[k.secretName], !value.isEmpty else {
                throw ServerStartError("the Data API server key '\(k.name)' needs its secret in \(k.secretName) (make one with `openssl rand -hex 32`), or remove the key from http_endpoints/data_api_config.json")
            }
            guard value.utf8.count >= Self.minimumBytes else {
                throw ServerStartError("the Data API server key '\(k.name)' (\(k.secretName)) must have at least \(Self.minimumBytes) bytes, it has \(value.utf8.count): a short key can be guessed")
            }
            return Key(name: k.name, secret: Array(value.utf8))
        }
    }

    /// The key a request presents in its `apiKey` header (the Atlas Data API's header), or an
    /// error: 404 when the Data API is off, 401 without a key or with a wrong one. Every
    /// declared key is compared in full, in constant time.
    func authorize(_ request: Request) throws -> Key {
        guard enabled else {
            throw APIError(status: .notFound, code: "DataAPIDisabled", message: "the Data API is disabled: turn it on in http_endpoints/data_api_config.json")
        }
        if request.headers[.authorization] != nil, request.headers[Self.header] == nil {
            throw APIError(status: .unauthorized, code: "InvalidSession",
                           message: "the Data API takes a server key in the apiKey header; users' access tokens are not accepted on it yet")
        }
        guard let given = request.headers[Self.header].map({ Array($0.utf8) }) else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the Data API needs a server key in the apiKey header")
        }
        var found: Key?
        for k in keys {
            var diff = UInt8(given.count == k.secret.count ? 0 : 1)
            for i in 0..<k.secret.count { diff |= k.secret[i] ^ (i < given.count ? given[i] : 0) }
            if diff == 0 { found = k }
        }
        guard let found else { throw APIError(status: .unauthorized, code: "InvalidSession", message: "invalid Data API key") }
        return found
    }
}
