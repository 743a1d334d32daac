import Hummingbird

/// The admin API's credential: the `FERRY_ADMIN_TOKEN` secret as a Bearer token. Without the
/// secret every admin call (and `/metrics` on the main port) is refused with 403.
struct AdminToken: Sendable {
    let token: String?

    func authorize(_ request: Request) throws {
        guard let token else { throw APIError(status: .forbidden, code: "AdminDisabled", message: "the admin API is disabled: set FERRY_ADMIN_TOKEN to enable it") }
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw APIError(status: .unauthorized, code: "MissingAuthReq", message: "the admin API needs an Authorization: Bearer header")
        }
        // Constant-time comparison: the token must not leak through timing.
        let given = Array(header.dropFirst(7).utf8), expected = Array(token.utf8)
        var diff = UInt8(given.count == expected.count ? 0 : 1)
        for i in 0..<min(given.count, expected.count) { diff |= given[i] ^ expected[i] }
        guard diff == 0 else { throw APIError(status: .unauthorized, code: "InvalidSession", message: "invalid admin token") }
    }
}
