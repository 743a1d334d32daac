/// Why an authentication request was refused. The HTTP layer maps each to a status and the
/// stable `code`, so clients can tell a wrong password from an expired token.
public enum AuthError: Error, Equatable, Sendable, CustomStringConvertible {
    case providerDisabled(String)
    case invalidCredentials
    case emailAlreadyRegistered
    case invalidEmail(String)
    case passwordTooShort(minimum: Int)
    case passwordTooLong(maximumBytes: Int)
    case invalidToken(String)
    case tokenExpired
    case invalidRefreshToken
    case userNotFound
    /// Too many failed password logins for the account or from the client's address: refused
    /// without looking at the password until `retryAfter` seconds have passed.
    case tooManyFailedLogins(retryAfter: Int)
    /// The client's address made more sign-ups (anonymous users, registrations) than its budget.
    case tooManySignups(retryAfter: Int)
    /// More password hashes are waiting than the server queues: try again shortly.
    case hashingBusy

    /// A stable identifier for the wire and the logs.
    public var code: String {
        switch self {
        case .providerDisabled: return "AuthProviderNotFound"
        case .invalidCredentials: return "InvalidPassword"
        case .emailAlreadyRegistered: return "AccountNameInUse"
        case .invalidEmail: return "BadRequest"
        case .passwordTooShort: return "BadRequest"
        case .passwordTooLong: return "BadRequest"
        case .invalidToken: return "InvalidSession"
        case .tokenExpired: return "InvalidSession"
        case .invalidRefreshToken: return "InvalidSession"
        case .userNotFound: return "UserNotFound"
        case .tooManyFailedLogins, .tooManySignups: return "TooManyRequests"
        case .hashingBusy: return "ServiceUnavailable"
        }
    }

    /// Whole seconds after which the request may succeed (the HTTP `Retry-After`), for the
    /// refusals that pass with time.
    public var retryAfter: Int? {
        switch self {
        case .tooManyFailedLogins(let s), .tooManySignups(let s): return s
        case .hashingBusy: return 1
        default: return nil
        }
    }

    public var description: String {
        switch self {
        case .providerDisabled(let p): return "authentication provider '\(p)' is not enabled for this app"
        case .invalidCredentials: return "invalid username/password"
        case .emailAlreadyRegistered: return "name already in use"
        case .invalidEmail(let why): return "the email address is not valid: \(why)"
        case .passwordTooShort(let n): return "the password must be at least \(n) characters"
        case .passwordTooLong(let n): return "the password must be at most \(n) bytes (UTF-8)"
        case .invalidToken(let why): return "invalid token: \(why)"
        case .tokenExpired: return "the token has expired"
        case .invalidRefreshToken: return "the refresh token is invalid, expired or revoked"
        case .userNotFound: return "no such user"
        case .tooManyFailedLogins(let s): return "too many failed logins for this account or from this address: try again in \(s) s"
        case .tooManySignups(let s): return "too many sign-ups from this address: try again in \(s) s"
        case .hashingBusy: return "the server is busy checking passwords: try again in a moment"
        }
    }
}
