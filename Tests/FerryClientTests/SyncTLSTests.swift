import FerryClient
import FerryCore
import Foundation
import Testing

/// Sync over TLS: ferry-server with a certificate made at test time, devices on https:// and
/// wss:// that trust it through the App's CA file, and a device that does not trust it.
@Suite("Sync over TLS", .serialized)
struct SyncTLSTests {
    static func makeCertificate() throws -> (certificate: String, key: String) {
        let dir = SyncTestServer.temporaryDirectory("tls")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                       "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "1",
                       "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw FerryError(.io, "openssl req failed") }
        return (dir + "/cert.pem", dir + "/key.pem")
    }

    @Test func devicesSyncOverWSS() async throws {
        let tls = try Self.makeCertificate()
        try await SyncTestServer.withServer(tls: tls) { url in
            #expect(url.hasPrefix("https://"))
            let trust = TLSOptions(caFile: tls.certificate)
            let a = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "tls-user")), tls: trust)
            let b = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: "tls-user")), tls: trust)
            defer { a.close(); b.close() }
            try await a.subscribe("complexity <= 4")
            try await b.subscribe("complexity <= 4")
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "over TLS", complexity: 2)
            try await a.sync()
            try await b.sync()
            #expect(try b.item(id)?[2] == .string("over TLS"))
        }
    }

    @Test func aDeviceThatDoesNotTrustTheCertificateCannotLogIn() async throws {
        let tls = try Self.makeCertificate()
        try await SyncTestServer.withServer(tls: tls) { url in
            do {
                _ = try await TestDevice(baseURL: url, credentials: .anonymous)
                Issue.record("the login should fail certificate verification")
            } catch let e as FerryError {
                #expect(e.code == .io || e.code == .network)
                #expect(e.message.lowercased().contains("certificate") || e.message.lowercased().contains("verif"))
            }
        }
    }
}
