import Crypto
import FerryClient
import FerryCore
@testable import FerryServer
import FerryStore
import Foundation
import Hummingbird
import Logging
import Testing

/// A real ferry-server on the seeds' Item app, in-process on 127.0.0.1 and an OS-chosen port.
enum SyncTestServer {
    static let appDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("examples/item-app").path

    static func temporaryDirectory(_ name: String) -> String {
        let dir = NSTemporaryDirectory() + "ferry-\(name)-\(UInt64.random(in: 0...UInt64.max))"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    static let convergenceAppDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures/convergence-app").path

    /// Whether the sync tests run on a cluster: `FERRY_TEST_CLUSTER=postgres` (CI sets it for a
    /// second run of the end-to-end, convergence and client-reset suites) puts two nodes on
    /// one PostgreSQL database behind tools/fault-proxy, which hands each new connection to the
    /// next node, so a test's devices, logins and admin calls are spread over both.
    static var clusterMode: Bool { ProcessInfo.processInfo.environment["FERRY_TEST_CLUSTER"] == "postgres" }

    /// Runs `body` with the base URL of a server: one node on SQLite, or in `clusterMode` the
    /// proxy in front of two nodes on PostgreSQL (except for tests that need TLS, a fixed port
    /// or a data directory kept across restarts: those stay on one SQLite node).
    static func withServer(appDirectory: String = appDirectory, tls: (certificate: String, key: String)? = nil,
                           dataDirectory: String? = nil, port: Int = 0, secrets: [String: String] = [:],
                           configure: @escaping (inout ServerConfiguration) -> Void = { _ in },
                           _ body: (String) async throws -> Void) async throws {
        guard clusterMode, tls == nil, dataDirectory == nil, port == 0 else {
            return try await withSingleServer(appDirectory: appDirectory, tls: tls, dataDirectory: dataDirectory, port: port,
                                              secrets: secrets, configure: configure, body)
        }
        try await SyncTestCluster.withNodes(2, appDirectory: appDirectory, secrets: secrets, configure: configure) { nodes in
            let proxy = try FaultProxy(serverURLs: nodes)
            defer { proxy.stop() }
            try await body(proxy.url)
        }
    }

    /// One in-process node (SQLite unless `configure` says otherwise).
    static func withSingleServer(appDirectory: String = appDirectory, tls: (certificate: String, key: String)? = nil,
                                 dataDirectory: String? = nil, port: Int = 0, secrets: [String: String] = [:],
                                 configure: (inout ServerConfiguration) -> Void = { _ in },
                                 _ body: (String) async throws -> Void) async throws {
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "ferry-server-test")
        logger.logLevel = .warning
        var config = ServerConfiguration(appDirectory: appDirectory, dataDirectory: dataDirectory ?? temporaryDirectory("server"), port: port,
                                         secrets: secrets.merging(["jwtSigningKey": "a-host-signing-key-of-at-least-32-bytes!"]) { a, _ in a },
                                         tlsCertificatePath: tls?.certificate, tlsKeyPath: tls?.key)
        // Dozens of servers run at once in the test process: without their descriptor
        // reserves (16 each) it stays below the ~1,300 descriptors past which Foundation's
        // Process.run reads out of bounds (ASan). The reserve is tested on the executable.
        config.descriptorReserve = 0
        // Test-only scrypt cost (internal, so production cannot set it): dozens of servers hash
        // passwords at once here, and at OWASP's cost each hash takes seconds in a debug build.
        // The cost itself is tested in FerryAuthTests (LoginBurstTests); servers run as executables (the C and binding tests) use OWASP's.
        config.passwordHashing = .fastForTests
        configure(&config)
        let app = try await FerryServer.make(config, logger: logger) { port in
            portSink.yield(port)
            portSink.finish()
        }
        let server = Task {
            // A server that stops before it listens (its port taken meanwhile, when the test
            // asked for one) ends the wait for its port: the wait hung the whole suite once.
            defer { portSink.finish() }
            try await app.runService(gracefulShutdownSignals: [])
        }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            server.cancel()
            Issue.record("the server did not start: \(await server.result)")
            return
        }
        do { try await body("\(tls == nil ? "http" : "https")://127.0.0.1:\(port)") } catch {
            server.cancel()
            _ = await server.result
            throw error
        }
        server.cancel()
        _ = await server.result
    }
}

/// The seeds' Item schema as the device declares it.
let itemSchema: Schema = {
    let os = try! ObjectSchema(name: "Item", properties: [
        Property(name: "_id", type: .objectId, isPrimaryKey: true),
        Property(name: "ownerId", type: .string),
        Property(name: "itemName", type: .string),
        Property(name: "complexity", type: .int),
    ])
    return try! Schema([os])
}()

/// One device: an App with its own base directory, a logged-in user, a synced database.
final class TestDevice: @unchecked Sendable {
    let app: App
    let user: SyncUser
    let session: SyncSession
    var db: Database { session.database }
    let errors = ErrorLog()

    init(baseURL: String, credentials: Credentials, register: (String, String)? = nil, tls: TLSOptions = TLSOptions(),
         schema: Schema = itemSchema, appId: String = "item-app-seeds") async throws {
        let dir = SyncTestServer.temporaryDirectory("device")
        app = try App(App.Configuration(appId: appId, baseURL: baseURL, baseDirectory: dir, tls: tls, logLevel: .warn))
        let errors = self.errors
        app.errorHandler = { _, e in errors.add(e) }
        if let (email, password) = register {
            let r = Arrival<Result<Void, FerryError>>()
            app.register(email: email, password: password) { r.deliver($0) }
            _ = await r.wait()
        }
        let login = Arrival<Result<SyncUser, FerryError>>()
        app.login(credentials) { login.deliver($0) }
        guard let result = await login.wait(seconds: 60) else { throw FerryError(.timeout, "login timed out") }
        user = try result.get()
        session = try app.openSynced(user: user, path: dir + "/items.ferry", schema: schema)
    }

    func subscribe(_ query: String, name: String = "items") async throws {
        let v = try session.updateSubscriptions { $0.add(name: name, objectType: "Item", query: query) }
        let done = Arrival<FerryError?>()
        session.waitForSubscriptions(version: v) { done.deliver($0) }
        guard let r = await done.wait() else { throw FerryError(.timeout, "subscription wait timed out") }
        if let e = r { throw e }
    }

    func waitUpload() async throws {
        let done = Arrival<FerryError?>()
        session.waitForUpload { done.deliver($0) }
        guard let r = await done.wait() else { throw FerryError(.timeout, "upload wait timed out") }
        if let e = r { throw e }
    }

    func waitDownload() async throws {
        let done = Arrival<FerryError?>()
        session.waitForDownload { done.deliver($0) }
        guard let r = await done.wait() else { throw FerryError(.timeout, "download wait timed out") }
        if let e = r { throw e }
    }

    func sync() async throws {
        try await waitUpload()
        try await waitDownload()
    }

    func write(_ body: (Database) throws -> Void) throws {
        try db.beginWrite()
        do { try body(db); try db.commit() } catch { try? db.cancel(); throw error }
    }

    func createItem(_ id: ObjectId, owner: String, name: String, complexity: Int64) throws {
        try write { try $0.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(owner)), (2, .string(name)), (3, .int(complexity))]) }
    }

    func item(_ id: ObjectId) throws -> [FerryValue]? { try db.object(classIndex: 0, key: .objectId(id)) }

    func allItems() throws -> [[FerryValue]] { try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []) }

    func close() {
        session.close()
        app.close()
    }
}

final class ErrorLog: @unchecked Sendable {
    private let lock = ThreadLock()
    private var errors: [SyncError] = []
    private var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    func add(_ e: SyncError) {
        lock.lock()
        errors.append(e)
        let ready = waiters.filter { $0.0 <= errors.count }
        waiters.removeAll { $0.0 <= errors.count }
        lock.unlock()
        for w in ready { w.1.resume() }
    }
    var all: [SyncError] { lock.withLock { errors } }

    /// Waits until at least `count` errors arrived (or the timeout).
    func wait(count: Int, seconds: Double = 20) async -> [SyncError] {
        let timeout = Task { [weak self] in
            // A cancelled sleep returns at once: only a real timeout may expire the waiters.
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self?.expire()
        }
        defer { timeout.cancel() }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            lock.lock()
            if errors.count >= count { lock.unlock(); c.resume(); return }
            waiters.append((count, c))
            lock.unlock()
        }
        return all
    }

    private func expire() {
        lock.lock()
        let w = waiters
        waiters.removeAll()
        lock.unlock()
        for x in w { x.1.resume() }
    }
}

extension ObjectId {
    static func generate() -> ObjectId { generate(secondsSinceEpoch: UInt32(Date().timeIntervalSince1970)) }
    var hexString: String { description }
}

/// A custom-token (HS256) JWT for the test apps' provider: the same subject is the same user,
/// and no password hashing slows the login down.
func testJWT(subject: String, key: String = "a-host-signing-key-of-at-least-32-bytes!", audience: String = "item-app") -> String {
    func b64(_ d: Data) -> String {
        d.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    let header = b64(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
    let exp = Int(Date().timeIntervalSince1970) + 3600
    let payload = b64(Data(#"{"sub":"\#(subject)","aud":"\#(audience)","exp":\#(exp)}"#.utf8))
    let mac = HMAC<SHA256>.authenticationCode(for: Data((header + "." + payload).utf8), using: SymmetricKey(data: Data(key.utf8)))
    return header + "." + payload + "." + b64(Data(mac))
}
