import FerryAuth
import FerryCore
import Foundation
import Hummingbird

/// The HTTP auth API, at the paths the Realm SDKs used (`/api/client/v2.0/...`), so an SDK
/// pointed at a Ferry server finds what it knows:
///
///     POST   /api/client/v2.0/app/{app}/auth/providers/anon-user/login
///     POST   /api/client/v2.0/app/{app}/auth/providers/local-userpass/register   {email, password}
///     POST   /api/client/v2.0/app/{app}/auth/providers/local-userpass/login      {username, password}
///     POST   /api/client/v2.0/app/{app}/auth/providers/custom-token/login        {token}
///     POST   /api/client/v2.0/app/{app}/auth/providers/api-key/login             {key}
///     POST   /api/client/v2.0/auth/session      Authorization: Bearer <refresh token>
///     DELETE /api/client/v2.0/auth/session      Authorization: Bearer <refresh token>
///     GET    /api/client/v2.0/auth/profile      Authorization: Bearer <access token>
///
/// Errors are JSON `{"error": message, "error_code": code}` with a fitting status; refusals
/// that pass with time (429, 503) carry `Retry-After` (docs/server-config.md,
/// "Authentication limits").
struct AuthRoutes {
    let appId: String
    let auth: AuthService
    /// Counts logins by provider and outcome (`ferry_auth_total`).
    var metrics: ServerMetrics? = nil

    struct LoginResponse: ResponseEncodable {
        var access_token: String
        var refresh_token: String
        var user_id: String
        var device_id: String
    }
    struct AccessTokenResponse: ResponseEncodable { var access_token: String }
    struct Profile: ResponseEncodable {
        var user_id: String
        var identities: [IdentityJSON]
        var data: [String: String]
    }
    struct IdentityJSON: Codable { var id: String; var provider_type: String }
    struct Credentials: Decodable {
        var username: String?
        var email: String?
        var password: String?
        var token: String?
        var key: String?
    }

    func add(to router: Router<ServerRequestContext>) {
        let app = router.group("api/client/v2.0/app/:app/auth/providers")
        app.post(":provider/login") { request, context -> Response in
            try checkApp(context)
            let provider = context.parameters.get("provider") ?? ""
            let body = provider == "anon-user" ? Credentials() : try await request.decode(as: Credentials.self, context: context)
            let session: AuthSession
            do {
                switch provider {
                case "anon-user": session = try await auth.loginAnonymous(from: context.clientAddress)
                case "local-userpass":
                    session = try await auth.login(email: body.username ?? body.email ?? "", password: body.password ?? "",
                                                   from: context.clientAddress)
                case "custom-token": session = try await auth.login(customToken: body.token ?? "")
                case "api-key": session = try await auth.login(apiKey: body.key ?? "")
                default: throw AuthError.providerDisabled(provider)
                }
                metrics?.authenticated(provider: provider, success: true)
            } catch {
                // Any provider name a client sends would be a label of its own: unknown ones share one.
                metrics?.authenticated(provider: ["anon-user", "local-userpass", "custom-token", "api-key"].contains(provider) ? provider : "other",
                                       success: false)
                throw error
            }
            return try json(LoginResponse(access_token: session.accessToken, refresh_token: session.refreshToken,
                                          user_id: session.userId, device_id: "000000000000000000000000"), request, context)
        }
        app.post("local-userpass/register") { request, context -> Response in
            try checkApp(context)
            let body = try await request.decode(as: Credentials.self, context: context)
            try await auth.register(email: body.email ?? body.username ?? "", password: body.password ?? "", from: context.clientAddress)
            return Response(status: .created)
        }
        let session = router.group("api/client/v2.0/auth")
        session.post("session") { request, context -> Response in
            let token: String
            do { token = try await auth.refresh(refreshToken: try bearer(request)) } catch {
                metrics?.authenticated(provider: "refresh-token", success: false)
                throw error
            }
            metrics?.authenticated(provider: "refresh-token", success: true)
            return try json(AccessTokenResponse(access_token: token), request, context)
        }
        session.delete("session") { request, _ -> Response in
            try await auth.logout(refreshToken: try bearer(request))
            return Response(status: .noContent)
        }
        session.get("profile") { request, context -> Response in
            let user = try await auth.authenticate(accessToken: try bearer(request))
            var data: [String: String] = [:]
            for (k, v) in user.data { if case .string(let s) = v { data[k] = s } else { data[k] = v.debugText } }
            return try json(Profile(user_id: user.id, identities: user.identities.map { IdentityJSON(id: $0.providerUserId, provider_type: $0.provider) },
                                    data: data), request, context)
        }
    }

    private func checkApp(_ context: ServerRequestContext) throws {
        guard context.parameters.get("app") == appId else {
            throw APIError(status: .notFound, code: "AppNotFound", message: "no app with that id is served here")
        }
    }

    private func bearer(_ request: Request) throws -> String {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the request needs an Authorization: Bearer header")
        }
        return String(header.dropFirst(7))
    }

    private func json(_ value: some ResponseEncodable, _ request: Request, _ context: ServerRequestContext) throws -> Response {
        try value.response(from: request, context: context)
    }
}

/// An API error with its JSON body.
struct APIError: HTTPResponseError {
    let status: HTTPResponse.Status
    let code: String
    let message: String
    /// Seconds for `Retry-After`, when waiting helps.
    var retryAfter: Int?

    func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = "{\"error\":\(jsonString(message)),\"error_code\":\(jsonString(code))}"
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    init(status: HTTPResponse.Status, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    init(_ e: AuthError) {
        let status: HTTPResponse.Status
        switch e {
        case .providerDisabled, .userNotFound: status = .notFound
        case .emailAlreadyRegistered: status = .conflict
        case .invalidEmail, .passwordTooShort, .passwordTooLong: status = .badRequest
        case .invalidCredentials, .invalidToken, .tokenExpired, .invalidRefreshToken: status = .unauthorized
        case .tooManyFailedLogins, .tooManySignups: status = .tooManyRequests
        case .hashingBusy: status = .serviceUnavailable
        }
        self.init(status: status, code: e.code, message: e.description)
        retryAfter = e.retryAfter
    }
}

func jsonString(_ s: String) -> String { JSONText.quote(s) }

/// Turns `AuthError`s thrown by routes into their API responses, and a store that cannot be
/// reached (a PostgreSQL pool with no connection to lend within its deadline, a database
/// that is down or busy) into 503 with `Retry-After`: the request may well succeed in a
/// moment, which a 500 does not tell a client (a login under heavy load on two nodes got 500).
struct AuthErrorMiddleware: RouterMiddleware {
    typealias Context = ServerRequestContext
    /// Seconds a client is asked to wait after a 503 for the store.
    static let storeRetryAfter = 1

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do { return try await next(request, context) } catch let e as AuthError { throw APIError(e) } catch let e as FerryError where Self.isUnavailable(e) {
            context.logger.error("\(request.method) \(request.uri.path): the store is unavailable: \(e.message)")
            var error = APIError(status: .serviceUnavailable, code: "ServiceUnavailable", message: "the server cannot reach its store; try again")
            error.retryAfter = Self.storeRetryAfter
            throw error
        }
    }

    static func isUnavailable(_ e: FerryError) -> Bool { [.io, .busy, .timeout].contains(e.code) }
}
