import FerryClient
import FerryCore
import Testing

/// The App's safe defaults (issue 22): TLS verification on unless asked off, and plain http
/// only to this machine unless the host opts in. No server: creating an App contacts nobody.
@Suite("App: transport security defaults")
struct AppSecurityTests {
    @Test func tlsOptionsVerifyByDefault() {
        #expect(TLSOptions().insecureSkipVerify == false)
        #expect(App.Configuration(appId: "a", baseURL: "https://example.com", baseDirectory: "/").allowInsecureHTTP == false)
    }

    @Test func loopbackHosts() throws {
        for url in ["http://localhost", "http://LocalHost:80", "http://127.0.0.1", "http://127.255.0.9:1", "http://[::1]:9",
                    "http://[0:0:0:0:0:0:0:1]", "http://[0000::0001]", "http://[::ffff:127.0.0.1]"] {
            #expect(try Endpoint(parsing: url).isLoopback, "\(url)")
        }
        for url in ["http://example.com", "http://localhost.example.com", "http://127.0.0.1.example.com", "http://128.0.0.1",
                    "http://10.0.0.1", "http://127.0.0", "http://127.0.0.1.5", "http://127.0.0.256", "http://1127.0.0.1",
                    "http://[::]", "http://[::2]", "http://[1::1]", "http://[::ffff:10.0.0.1]",
                    "http://[:::1]", "http://[0:0:0:0:0:0:0:0:1]", "http://0.0.0.0"] {
            #expect(try !Endpoint(parsing: url).isLoopback, "\(url)")
        }
    }

    @Test func plainHTTPToAnotherHostNeedsTheOptIn() throws {
        let dir = SyncTestServer.temporaryDirectory("app-security")
        for url in ["http://example.com", "http://10.0.0.7:9090", "http://[2001:db8::1]:80"] {
            var config = App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .off)
            do {
                _ = try App(config)
                Issue.record("\(url) was accepted without allowInsecureHTTP")
            } catch let e as FerryError {
                #expect(e.code == .invalidArgument)
                #expect(e.message.contains("allowInsecureHTTP") && e.message.contains("allow_insecure_http"))
            }
            config.allowInsecureHTTP = true
            try App(config).close()
        }
        for url in ["http://localhost:9", "http://127.0.0.1:9", "http://[::1]:9", "https://example.com"] {
            try App(App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .off)).close()
        }
    }
}
