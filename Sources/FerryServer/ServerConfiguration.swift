import FerryAuth
import FerrySyncStorage
import Foundation

/// How to run a Ferry server.
public struct ServerConfiguration: Sendable {
    /// The app directory in the App Services export layout (docs/server-config.md).
    public var appDirectory: String
    /// Where the server keeps its state (created if missing): the embedded store's files, and
    /// the access-token secret when the store is embedded and none is configured.
    public var dataDirectory: String
    /// The store: embedded SQLite in `dataDirectory` (default), or PostgreSQL shared by nodes.
    public var database: DatabaseLocation = .embedded
    /// The most connections a node opens to PostgreSQL (its pool; one more is its change-feed
    /// listener). Every node has its own, so the database's `max_connections` must cover the
    /// sum.
    public var databaseConnections = 20
    public var host: String
    /// 0 lets the OS choose a free port (tests); the chosen one is reported when running.
    public var port: Int
    /// Secret values by name (e.g. `jwtSigningKey` for the custom-token provider, and
    /// `FERRY_TOKEN_SECRET` for access tokens), normally from the environment.
    public var secrets: [String: String]
    /// PEM files of the TLS certificate chain and private key: with both, the server speaks
    /// HTTPS and WSS only.
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// Login and sign-up limits and the password-hashing pool (docs/server-config.md,
    /// "Authentication limits").
    public var authLimits = AuthLimits()
    /// What one user's sync messages may cost (docs/server-config.md, "Sync limits").
    public var syncLimits = SyncLimits()
    /// Connection count, timeouts and the bytes a connection may make the server hold
    /// (docs/server-config.md, "Limits and timeouts").
    public var connectionLimits = ConnectionLimits()
    /// Descriptors held back to give the process when `accept` finds none left
    /// (`DescriptorReserve`). Tests that run dozens of servers in one process set it to 0.
    public var descriptorReserve = 16
    /// Awaited with the uploader's user id when an upload has read the objects it merges and
    /// is about to merge them, outside the app's write lock (`PremergedUpload`). For tests: a
    /// merge held here holds up nobody else's upload, and one whose objects moved meanwhile
    /// is merged again. nil in production.
    public var beforeUploadMerge: (@Sendable (String) async -> Void)?
    /// This node's name in the sync log, the device list and `GET stats` (default: the host
    /// name and a random suffix, new at every start).
    public var nodeId: String = ServerConfiguration.defaultNodeId()
    /// Serve `GET /metrics` without the admin token on a listener of its own at
    /// `metricsHost:metricsPort` (0: any free port, reported to `onMetricsListening`).
    public var metricsPort: Int?
    public var metricsHost = "127.0.0.1"
    public var onMetricsListening: (@Sendable (Int) async -> Void)?
    /// Serve the admin API, the console (`/admin`) and `/metrics` behind the admin token on a
    /// listener of their own at `adminHost:adminPort` (0: any free port, reported to
    /// `onAdminListening`), and not on the public port (there they are 404). The production
    /// setup: bind it to an address only operators reach.
    public var adminPort: Int?
    public var adminHost = "127.0.0.1"
    public var onAdminListening: (@Sendable (Int) async -> Void)?
    /// Reverse proxies whose header says which client a request is from, for the per-address
    /// limits (`--trusted-proxy`, `--client-address-header`); nil: the TCP peer is the client.
    public var trustedProxies: TrustedProxies?
    /// The scrypt cost of new password hashes. Internal, so only the tests (through
    /// `@testable import`, or `weakenPasswordHashingForLocalTests` on a loopback-only server)
    /// can lower it from OWASP's (`PasswordHasher.Parameters.standard`).
    var passwordHashing = PasswordHasher.Parameters.standard

    /// Lowers the scrypt cost of new password hashes to `fastForTests` (N = 2^10) for the test
    /// suites that start `ferry-server` as a process (C, Python, the console, the backend):
    /// under a debug build each standard hash costs seconds of a core, and those suites log in
    /// by the hundred. Refused unless the server listens on a loopback address only, so it
    /// cannot weaken a server anyone else reaches; `ferry-server` logs a warning when it is on.
    /// A hash made so is replaced by a standard one at the next login without it.
    public mutating func weakenPasswordHashingForLocalTests() throws {
        guard Self.isLoopback(host) else {
            throw ServerStartError("weak password hashing is for tests on a loopback address only (this server listens on \(host))")
        }
        passwordHashing = .fastForTests
    }

    /// `localhost`, or an address (not a name, which DNS could point anywhere) in 127.0.0.0/8
    /// or `::1`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" { return true }
        guard let address = IPNetwork(host)?.address else { return false }
        return address.count == 4 ? address[0] == 127 : address == [UInt8](repeating: 0, count: 15) + [1]
    }
    /// Wrong admin tokens an address may send before it must wait, and the waits. Internal:
    /// tests lengthen the wait so it cannot run out between two requests.
    var adminFailureLimits = AdminFailureThrottle.Limits()
    /// How much of every user's sync log is kept (`--sync-log-max-per-user`,
    /// `--sync-log-max-age-days`).
    public var syncLogRetention = SyncLogRetention()
    /// How often this node publishes its connections for the cluster's device list.
    public var connectionPublishInterval: Duration = .seconds(5)
    /// On PostgreSQL, the schema holding the app's classes as SQL tables (docs/backend.md);
    /// nil: no tables are kept.
    public var sqlTablesSchema: String? = "ferry_data"
    /// On PostgreSQL, drop and make the SQL tables again from the synced objects at start.
    public var rebuildSQLTables = false
    /// How triggers deliver: leases, retries, the webhook's timeout (tests shorten them).
    public var triggerTiming = TriggerTiming()

    /// `gethostname`, not `ProcessInfo.hostName`, which resolves every interface's address
    /// (reverse DNS: slow, or stuck, where DNS is).
    public static func defaultNodeId() -> String {
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        return "\(host.split(separator: ".").first.map(String.init) ?? "node")-\(suffix)"
    }

    public init(appDirectory: String, dataDirectory: String, host: String = "127.0.0.1", port: Int = 0,
                secrets: [String: String] = [:], tlsCertificatePath: String? = nil, tlsKeyPath: String? = nil) {
        self.tlsCertificatePath = tlsCertificatePath
        self.tlsKeyPath = tlsKeyPath
        self.appDirectory = appDirectory
        self.dataDirectory = dataDirectory
        self.host = host
        self.port = port
        self.secrets = secrets
    }
}

/// Why the server cannot start, said so a person can fix it.
public struct ServerStartError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
