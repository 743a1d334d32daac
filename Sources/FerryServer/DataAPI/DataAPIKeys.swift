import FerryAppConfig
import FerryAuth
import FerryCore
import HTTPTypes
import Hummingbird

/// The Data API's server keys with their secrets, resolved at start from the server's
/// secrets (the environment). A declared key whose secret is missing or shorter than 32 bytes
/// stops the server from starting: a backend's key runs as the system, past every rule, or
/// as the role its declaration names (which must be a role of the app's rules).
struct DataAPIKeys: Sendable {
    static let minimumBytes = 32
    /// The Atlas Data API's header for a key.
    static let header = HTTPField.Name("apiKey")!

    struct Key: Sendable {
        let name: String
        let secret: [UInt8]
        /// The rules' role it runs as (nil: the system).
        var role: String? = nil
    }
    let keys: [Key]
    let enabled: Bool

    /// `roles`: the names of the roles the app's rules declare.
    init(_ config: DataAPIConfiguration, secrets: [String: String], roles: Set<String> = []) throws {
        enabled = !config.disabled
        keys = try config.serverKeys.map { k in
            if let role = k.role, !roles.contains(role) {
                throw ServerStartError("the Data API server key '\(k.name)' runs as role '\(role)', which no collection's rules declare (roles: \(roles.sorted().joined(separator: ", ")))")
            }
            guard let value = secrets[k.secretName], !value.isEmpty else {
                throw ServerStartError("the Data API server key '\(k.name)' needs its secret in \(k.secretName) (make one with `openssl rand -hex 32`), or remove the key from http_endpoints/data_api_config.json")
            }
            guard value.utf8.count >= Self.minimumBytes else {
                throw ServerStartError("the Data API server key '\(k.name)' (\(k.secretName)) must have at least \(Self.minimumBytes) bytes, it has \(value.utf8.count): a short key can be guessed")
            }
            return Key(name: k.name, secret: Array(value.utf8), role: k.role)
        }
    }

    /// Who calls: a server key in the `apiKey` header (the Atlas Data API's header), else a
    /// user's access token (`Authorization: Bearer`), who gets exactly that user's rules. 404
    /// when the Data API is off, 401 without credentials or with wrong ones. Every declared key
    /// is compared in full, in constant time.
    func caller(_ request: Request, auth: AuthService) async throws -> DataAPICaller {
        guard enabled else {
            throw APIError(status: .notFound, code: "DataAPIDisabled", message: "the Data API is disabled: turn it on in http_endpoints/data_api_config.json")
        }
        guard let given = request.headers[Self.header].map({ Array($0.utf8) }) else {
            guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
                throw APIError(status: .unauthorized, code: "MissingAuthReq",
                               message: "the Data API needs a server key in the apiKey header or a user's access token (Authorization: Bearer)")
            }
            do { return .user(try await auth.authenticate(accessToken: String(header.dropFirst(7))).context) } catch let e as AuthError {
                throw APIError(e)
            }
        }
        var found: Key?
        for k in keys {
            var diff = UInt8(given.count == k.secret.count ? 0 : 1)
            for i in 0..<k.secret.count { diff |= k.secret[i] ^ (i < given.count ? given[i] : 0) }
            if diff == 0 { found = k }
        }
        guard let found else { throw APIError(status: .unauthorized, code: "InvalidSession", message: "invalid Data API key") }
        return .key(found)
    }
}

/// Who makes a Data API call.
enum DataAPICaller: Sendable {
    /// A backend's server key: the system (every object, no rule), or the role it names.
    case key(DataAPIKeys.Key)
    /// A user's access token: that user's rules.
    case user(UserContext)
}
