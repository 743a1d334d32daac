import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing
@testable import FerryServer

/// The admin console's files (`/admin`): served with their types, never cached, under a policy
/// that allows only the server's own script, style and API. The browser test
/// (tests/console) drives the pages themselves.
@Suite("Server: admin console files")
struct ConsoleRoutesTests {
    func configuration() -> ServerConfiguration {
        ServerConfiguration(appDirectory: AuthAPITests.example,
                            dataDirectory: NSTemporaryDirectory() + "ferry-console-\(UInt64.random(in: 0...UInt64.max))",
                            secrets: ["jwtSigningKey": AuthAPITests.jwtKey])
    }

    @Test func servesThePageAndItsAssets() async throws {
        try await FerryServer.make(configuration()).test(.router) { client in
            for (path, type) in [("/admin", "text/html"), ("/admin/", "text/html"), ("/admin/console.js", "text/javascript"),
                                 ("/admin/console.css", "text/css"), ("/admin/favicon.svg", "image/svg+xml")] {
                try await client.execute(uri: path, method: .get) { response in
                    #expect(response.status == .ok, "\(path)")
                    #expect(response.headers[.contentType]?.hasPrefix(type) == true, "\(path)")
                    #expect(response.headers[.cacheControl] == "no-store")
                    #expect(response.headers[.contentSecurityPolicy]?.hasPrefix("default-src 'self';") == true)
                    #expect(response.headers[.xContentTypeOptions] == "nosniff")
                    #expect(response.body.readableBytes > 0)
                }
            }
            try await client.execute(uri: "/admin/nothing-here.js", method: .get) { #expect($0.status == .notFound) }
        }
    }

    @Test func thePageHasNothingInlineAndNothingFromElsewhere() async throws {
        let page = ConsoleAssets.page
        #expect(!page.contains("<script>") && !page.contains("style="))
        #expect(page.contains("<script src=\"/admin/console.js\""))
        for outside in ["http://", "https://", "src=\"//", "href=\"//"] { #expect(!page.contains(outside)) }
        // The script never parses data as HTML.
        #expect(!ConsoleAssets.script.contains("innerHTML") && !ConsoleAssets.script.contains("insertAdjacentHTML"))
    }
}
