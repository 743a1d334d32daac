import FerryPostgresStorage
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

    @Test func aRootCertificateWithoutVerificationIsRefused() {
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=require&sslrootcert=/ca.pem") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslmode=verify-full&sslrootcert=") }
        #expect(throws: (any Error).self) { try PostgresLocation(url: "postgres://ferry@db/ferry?sslcert=/c.pem") }
    }
}
