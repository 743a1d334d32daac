// favicon.svg of the admin console, served by ConsoleRoutes. Edit the text between the quotes as
// the SVG it is: it is a raw string, so nothing in it is escaped or interpolated.

extension ConsoleAssets {
    /// The icon (`/admin/favicon.svg`).
    static let icon = #"""
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#111827"/><path d="M6 20h20l-3 5H9z" fill="#1f6feb"/><path d="M15 6v12h-7z" fill="#ffffff"/><path d="M17 9v9h6z" fill="#9aa4b2"/></svg>
"""#
}
