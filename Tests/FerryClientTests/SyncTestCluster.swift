import FerryPostgresStorage
import FerryServer
import Foundation
import Logging
import PostgresNIO
import Testing

/// Several in-process ferry-server nodes on one PostgreSQL database of their own (made for the
/// test and dropped after it), for the tests of a cluster. Needs `FERRY_TEST_POSTGRES_URL`
/// (scripts/postgres-cluster.sh prints one; its role may create databases).
enum SyncTestCluster {
    static var postgresURL: String? {
        guard let url = ProcessInfo.processInfo.environment["FERRY_TEST_POSTGRES_URL"], !url.isEmpty else { return nil }
        return url
    }

    static var isAvailable: Bool { postgresURL != nil }

    /// Runs `body` with the base URLs of `count` nodes serving the Item app from one fresh
    /// database; no `FERRY_TOKEN_SECRET` is given, so the nodes share the secret kept in it.
    static func withNodes(_ count: Int = 2, appDirectory: String = SyncTestServer.appDirectory, secrets: [String: String] = [:],
                          configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
                          _ body: ([String]) async throws -> Void) async throws {
        guard let base = postgresURL else { try Test.cancel("FERRY_TEST_POSTGRES_URL is not set: no PostgreSQL to run a cluster on") }
        try await withDatabase(base) { url in
            try await start(count, appDirectory: appDirectory, url: url, secrets: secrets, configure: configure, urls: [], body)
        }
    }

    /// Runs `body` with the URL of a new, empty database on the cluster `base` names, dropped
    /// afterwards.
    static func withDatabase(_ base: String, _ body: (String) async throws -> Void) async throws {
        let database = "ferry_t_\(UInt64.random(in: 0...UInt64.max))"
        try await administer(base, "CREATE DATABASE \(database)")
        var location = try PostgresLocation(url: base)
        location.database = database
        let url = "postgres://\(location.user):\(location.password ?? "")@\(location.host):\(location.port)/\(database)"
        do {
            try await body(url)
        } catch {
            try? await administer(base, "DROP DATABASE \(database) WITH (FORCE)")
            throw error
        }
        try await administer(base, "DROP DATABASE \(database) WITH (FORCE)")
    }

    /// A fault proxy in front of `database`'s server, and the URL that reaches the database
    /// through it (a node given that URL can have its database connections cut).
    static func proxied(_ database: String) throws -> (url: String, proxy: FaultProxy) {
        let postgres = try hostAndPort(of: database)
        let proxy = try FaultProxy(serverURLs: ["postgres://\(postgres)"])
        return (database.replacingOccurrences(of: "@\(postgres)/", with: "@\(proxy.url.dropFirst("http://".count))/"), proxy)
    }

    /// "HOST:PORT" of a database URL.
    static func hostAndPort(of url: String) throws -> String {
        let location = try PostgresLocation(url: url)
        return "\(location.host):\(location.port)"
    }

    private static func start(_ remaining: Int, appDirectory: String, url: String, secrets: [String: String],
                              configure: @escaping (inout ServerConfiguration) -> Void,
                              urls: [String], _ body: ([String]) async throws -> Void) async throws {
        guard remaining > 0 else { return try await body(urls) }
        try await SyncTestServer.withSingleServer(appDirectory: appDirectory, secrets: secrets, configure: { config in
            config.database = .postgres(url: url)
            // Tests run in parallel, each with its own nodes: a small pool each keeps them all
            // under the test cluster's connection limit.
            config.databaseConnections = 4
            configure(&config)
        }) { nodeURL in
            try await start(remaining - 1, appDirectory: appDirectory, url: url, secrets: secrets, configure: configure, urls: urls + [nodeURL], body)
        }
    }

    /// Runs one statement on the test cluster's database (outside any transaction), retried a
    /// few times: CREATE DATABASE fails while another session copies the template at once
    /// (tests run in parallel).
    static func administer(_ url: String, _ sql: String) async throws {
        for attempt in 1...5 {
            do { return try await administerOnce(url, sql) } catch where attempt < 5 {
                try await Task.sleep(for: .milliseconds(200 * attempt))
            } catch {
                throw FerryTestError("\(sql): \(String(reflecting: error))")
            }
        }
    }

    private static func administerOnce(_ url: String, _ sql: String) async throws {
        let location = try PostgresLocation(url: url)
        let config = PostgresConnection.Configuration(host: location.host, port: location.port, username: location.user,
                                                      password: location.password, database: location.database, tls: .disable)
        let connection = try await PostgresConnection.connect(configuration: config, id: 1, logger: Logger(label: "ferry-test-cluster"))
        do {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "ferry-test-cluster"))
        } catch {
            try? await connection.close()
            throw error
        }
        try await connection.close()
    }
}

struct FerryTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
