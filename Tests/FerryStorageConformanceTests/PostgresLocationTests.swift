@testable import FerryPostgresStorage
import Foundation
import Logging
import PostgresNIO
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
        // A connection of its own (the store's first step, `PostgresBackend.probe`), not a
        // store: the conformance tests empty this database meanwhile.
        func connect(_ root: String) async throws {
            let connection = try await PostgresConnection.connect(configuration: try location(root).connectionConfiguration(), id: 1, logger: logger)
            defer { Task { try? await connection.close() } }
            let rows = try await connection.query("SELECT 1", logger: logger)
            var count = 0
            for try await _ in rows { count += 1 }
            #expect(count == 1)
        }
        try await connect(ca)
        do {
            try await connect(Self.unrelatedCA)
            Issue.record("connected with verify-full against a CA that did not sign the server's certificate")
        } catch {
            // The handshake fails on the certificate (`String(reflecting:)`: PSQLError hides its cause from `description`).
            #expect(String(reflecting: error).contains("CERTIFICATE_VERIFY_FAILED"), "\(String(reflecting: error))")
        }
    }

    @Test func aRootCertificateWithoutVerificationIsRefused() {
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=require&sslrootcert=/ca.pem") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=verify-full&sslrootcert=") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslcert=/c.pem") }
    }
}
