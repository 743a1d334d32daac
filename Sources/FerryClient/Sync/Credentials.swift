import FerryCore
/// How a user logs in, by auth provider (the seeds' `Credentials`).
public enum Credentials: Sendable {
    case anonymous
    case emailPassword(email: String, password: String)
    /// A JWT signed by the host's own auth system (custom-token provider).
    case jwt(String)
    case apiKey(String)

    /// The provider's path segment in the auth API.
    var provider: String {
        switch self {
        case .anonymous: return "anon-user"
        case .emailPassword: return "local-userpass"
        case .jwt: return "custom-token"
        case .apiKey: return "api-key"
        }
    }

    var body: String {
        switch self {
        case .anonymous: return "{}"
        case let .emailPassword(email, password): return JSON.encodeObject([("username", email), ("password", password)])
        case .jwt(let token): return JSON.encodeObject([("token", token)])
        case .apiKey(let key): return JSON.encodeObject([("key", key)])
        }
    }
}
