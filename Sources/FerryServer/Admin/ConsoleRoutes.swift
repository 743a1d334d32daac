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

/// The console's files, edited as the HTML, CSS, JavaScript and SVG they are in
/// `Admin/Console/` and compiled into the binary by SwiftPM (`.embedInCode` in Package.swift):
/// a bundle of resources would have to sit next to the executable, and a copied `ferry-server`
/// would lose its console.
enum ConsoleAssets {
    /// The one page (`/admin`, `/admin/`): the shell, the sign-in form and the confirmation dialog.
    static let page = text(PackageResources.index_html)
    /// The look (`/admin/console.css`).
    static let style = text(PackageResources.console_css)
    /// Everything the console does (`/admin/console.js`): reads the admin API with the token.
    static let script = text(PackageResources.console_js)
    /// The icon (`/admin/favicon.svg`).
    static let icon = text(PackageResources.favicon_svg)

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
