import FerryPostgresStorage
import Foundation
import Logging
import Testing

/// Issue 22, point 8: a PostgreSQL connection can verify the server's certificate against a CA
/// of the operator's (`sslmode=verify-full&sslrootcert=...`, libpq's names), and a root file
/// given without verification is refused rather than silently unused.
@Suite("PostgreSQL location")
struct PostgresLocationTests {
    @Test func verifyFullTakesARootCertificateFile() throws {
        let l = try PostgresLocation(url: "postgres://ferry@db.internal:5432/ferry?sslmode=verify-full&sslrootcert=/etc/ferry/ca%20file.pem")
        #expect(l.tlsMode == .verifyFull)
        #expect(l.rootCertificatePath == "/etc/ferry/ca file.pem")
        #expect(l.password == nil)
        #expect(!l.description.contains("ca file"))
    }

    /// CI's PostgreSQL cluster serves TLS with a certificate from a CA of its own
    /// (scripts/postgres-cluster.sh): verify-full with that CA connects; with a CA that did
    /// not sign it, the connection is refused before any password is sent.
    static let cluster: (url: String, ca: String)? = {
        let env = ProcessInfo.processInfo.environment
        guard let url = env["FERRY_TEST_POSTGRES_URL"], let ca = env["FERRY_TEST_POSTGRES_CA"], !url.isEmpty, !ca.isEmpty else { return nil }
        return (url, ca)
    }()

    static let unrelatedCA = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/tls/unrelated-ca.pem").path

    @Test(.enabled(if: cluster != nil, "needs FERRY_TEST_POSTGRES_URL and FERRY_TEST_POSTGRES_CA (scripts/postgres-cluster.sh)"))
    func verifyFullChecksTheServersCertificate() async throws {
        let (url, ca) = try #require(Self.cluster)
        var logger = Logger(label: "postgres-tls")
        logger.logLevel = .critical
        func location(_ root: String) throws -> PostgresLocation {
            try PostgresLocation(url: url + "?sslmode=verify-full&sslrootcert=" + (root.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? root))
        }
        let backend = try await PostgresBackend.open(try location(ca), logger: logger, maximumConnections: 2)
        await backend.close()
        do {
            let wrong = try await PostgresBackend.open(try location(Self.unrelatedCA), logger: logger, maximumConnections: 2)
            await wrong.close()
            Issue.record("connected with verify-full against a CA that did not sign the server's certificate")
        } catch {
            #expect("\(error)".lowercased().contains("certificate") || "\(error)".lowercased().contains("ssl") || "\(error)".lowercased().contains("tls"), "\(error)")
        }
    }

    @Test func aRootCertificateWithoutVerificationIsRefused() {
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=require&sslrootcert=/ca.pem") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=verify-full&sslrootcert=") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslcert=/c.pem") }
    }
}
