/// Why an authentication request was refused. The HTTP layer maps each to a status and the
/// stable `code`, so clients can tell a wrong password from an expired token.
public enum AuthError: Error, Equatable, Sendable, CustomStringConvertible {
    case providerDisabled(String)
    case invalidCredentials
    case emailAlreadyRegistered
    case invalidEmail
    case passwordTooShort(minimum: Int)
    case invalidToken(String)
    case tokenExpired
    case invalidRefreshToken
    case userNotFound

    /// A stable identifier for the wire and the logs.
    public var code: String {
        switch self {
        case .providerDisabled: return "AuthProviderNotFound"
        case .invalidCredentials: return "InvalidPassword"
        case .emailAlreadyRegistered: return "AccountNameInUse"
        case .invalidEmail: return "BadRequest"
        case .passwordTooShort: return "BadRequest"
        case .invalidToken: return "InvalidSession"
        case .tokenExpired: return "InvalidSession"
        case .invalidRefreshToken: return "InvalidSession"
        case .userNotFound: return "UserNotFound"
        }
    }

    public var description: String {
        switch self {
        case .providerDisabled(let p): return "authentication provider '\(p)' is not enabled for this app"
        case .invalidCredentials: return "invalid username/password"
        case .emailAlreadyRegistered: return "name already in use"
        case .invalidEmail: return "the email address is not valid"
        case .passwordTooShort(let n): return "the password must be at least \(n) characters"
        case .invalidToken(let why): return "invalid token: \(why)"
        case .tokenExpired: return "the token has expired"
        case .invalidRefreshToken: return "the refresh token is invalid, expired or revoked"
        case .userNotFound: return "no such user"
        }
    }
}
