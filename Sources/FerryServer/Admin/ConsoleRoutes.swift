import HTTPTypes
import Hummingbird
import NIOCore

/// The admin console in the browser, at `/admin`: one page of HTML, CSS and JavaScript compiled
/// into the server (`ConsoleAssets`), so there is nothing to install next to the binary and
/// nothing fetched from elsewhere. The page is public and holds no data: the operator signs in
/// with the admin token, and the script reads everything from the admin API (`AdminRoutes`)
/// with it. Served whether or not the admin API is enabled; without `FERRY_ADMIN_TOKEN` the
/// page says that the API is disabled.
struct ConsoleRoutes {
    /// Only this server's own files and API: no inline script or style, no frames, no plugins.
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    func add(to router: Router<ServerRequestContext>) {
        let page = Self.response(ConsoleAssets.page, type: "text/html; charset=utf-8")
        // Also `/admin/`: the router drops a trailing slash.
        router.get("admin") { _, _ in page }
        let assets = [
            ("console.css", ConsoleAssets.style, "text/css; charset=utf-8"),
            ("console.js", ConsoleAssets.script, "text/javascript; charset=utf-8"),
            ("favicon.svg", ConsoleAssets.icon, "image/svg+xml"),
        ]
        for (name, text, type) in assets {
            let response = Self.response(text, type: type)
            router.get("admin/\(name)") { _, _ in response }
        }
    }

    /// The assets change with the server binary, so nothing is cached: a browser never pairs
    /// an old script with a new server's API.
    static func response(_ text: String, type: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        headers[.cacheControl] = "no-store"
        // frame-ancestors does what X-Frame-Options did; the page's meta tag sets no-referrer.
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }
}

/// The console's files, as Swift strings (one file each: `ConsoleAssets-html.swift`,
/// `-css`, `-js`, `-svg`): SwiftPM resources would need a bundle next to the executable,
/// and a copied `ferry-server` binary would lose its console.
enum ConsoleAssets {}
