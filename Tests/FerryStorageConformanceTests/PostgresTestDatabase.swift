import FerryPostgresStorage
import Foundation
import Logging
import PostgresNIO

/// The PostgreSQL database the conformance tests may empty: `FERRY_TEST_POSTGRES_URL`
/// (`postgres://user:password@host:port/database`, a local one without TLS; scripts/postgres-cluster.sh
/// prints one). Its tests take turns on it: each empties it (drops every object its role owns:
/// whatever tables, schemas and sequences the backend migrated) before opening, so each starts
/// as on a new install. Turns are taken in this process, and across processes with an
/// advisory lock, so two test runs against one database cannot empty it under each other.
enum PostgresTestDatabase {
    static var url: String? {
        guard let url = ProcessInfo.processInfo.environment["FERRY_TEST_POSTGRES_URL"], !url.isEmpty else { return nil }
        return url
    }

    static let logger: Logger = {
        var logger = Logger(label: "ferry.storage-conformance")
        logger.logLevel = .warning
        return logger
    }()

    private static let turn = AsyncTurn()
    /// An arbitrary constant: the advisory lock of the conformance suite.
    private static let lockKey: Int64 = 0x4665_7272_7943_6F6E

    static func withEmptyDatabase<T: Sendable>(url: String, _ body: (any StorePlace) async throws -> T) async throws -> T {
        await turn.acquire()
        defer { turn.release() }
        let connection = try await connect(url)
        do {
            try await connection.query("SELECT pg_advisory_lock(\(lockKey))", logger: logger)
            // A backend that failed to close its connections would hold locks: fail, don't hang.
            try await connection.query("SET lock_timeout = '30s'", logger: logger)
            try await connection.query("DROP OWNED BY CURRENT_USER CASCADE", logger: logger)
            let result = try await body(PostgresPlace(url: url))
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// A connection of the suite's own (to empty the database and hold the lock), over plain
    /// TCP: the test database is local.
    static func connect(_ url: String) async throws -> PostgresConnection {
        let location = try PostgresLocation(url: url)
        guard location.tlsMode == .disable || location.tlsMode == .prefer else { throw PostgresTLSUnsupported() }
        let configuration = PostgresConnection.Configuration(host: location.host, port: location.port, username: location.user,
                                                             password: location.password, database: location.database, tls: .disable)
        return try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
    }
}

struct PostgresTLSUnsupported: Error, CustomStringConvertible {
    var description: String { "FERRY_TEST_POSTGRES_URL: the conformance suite connects to its local test database without TLS (sslmode=disable or prefer)" }
}

/// The PostgreSQL backend's place: the test database, opened as a server node opens it.
struct PostgresPlace: StorePlace {
    let url: String

    func open() async throws -> OpenStore {
        let backend = try await PostgresBackend.open(try PostgresLocation(url: url), logger: PostgresTestDatabase.logger)
        return OpenStore(storage: backend.storage, users: backend.users, operations: backend.operations) { await backend.close() }
    }
}
