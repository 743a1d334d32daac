@testable import FerryClient
import FerryCore
import FerryStore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Events delivered on the loop thread (connection states, progress reports), recorded so a
/// test can wait for the one it expects, with a timeout.
final class EventLog<T: Sendable>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var items: [T] = []
    private var waiters: [(predicate: ([T]) -> Bool, continuation: CheckedContinuation<Bool, Never>)] = []

    func add(_ item: T) {
        lock.lock()
        items.append(item)
        let snapshot = items
        var ready: [CheckedContinuation<Bool, Never>] = []
        waiters.removeAll { w in
            guard w.predicate(snapshot) else { return false }
            ready.append(w.continuation)
            return true
        }
        lock.unlock()
        for r in ready { r.resume(returning: true) }
    }

    var all: [T] { lock.withLock { items } }

    /// Whether `predicate` held on the events within `seconds`.
    func wait(seconds: Double = 20, until predicate: @escaping ([T]) -> Bool) async -> Bool {
        let timeout = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            self?.expire()
        }
        defer { timeout.cancel() }
        return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            lock.lock()
            if predicate(items) { lock.unlock(); c.resume(returning: true); return }
            waiters.append((predicate, c))
            lock.unlock()
        }
    }

    private func expire() {
        lock.lock()
        let w = waiters
        waiters.removeAll()
        lock.unlock()
        for x in w { x.continuation.resume(returning: false) }
    }
}

/// An App of one user (a custom-JWT subject, so several Apps can be the same user) with a
/// configuration a test chooses, opening as many synced databases as it likes.
final class SessionTestApp: @unchecked Sendable {
    let app: App
    let user: SyncUser
    let directory: String

    init(url: String, subject: String, directory: String? = nil, configure: (inout App.Configuration) -> Void = { _ in }) async throws {
        let dir = directory ?? SyncTestServer.temporaryDirectory("session")
        self.directory = dir
        var config = App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .warn)
        configure(&config)
        app = try App(config)
        let login = Arrival<Result<SyncUser, FerryError>>()
        app.login(.jwt(testJWT(subject: subject))) { login.deliver($0) }
        guard let result = await login.wait(seconds: 60) else { throw FerryError(.timeout, "login timed out") }
        user = try result.get()
    }

    /// An App on a directory whose user logged in earlier (no network needed).
    init(cachedIn directory: String, url: String, configure: (inout App.Configuration) -> Void = { _ in }) throws {
        self.directory = directory
        var config = App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: directory, logLevel: .warn)
        configure(&config)
        app = try App(config)
        guard let u = app.currentUser else { throw FerryError(.notFound, "no cached user in \(directory)") }
        user = u
    }

    func open(_ name: String, options: SyncOpenOptions = SyncOpenOptions()) throws -> SyncSession {
        try app.openSynced(user: user, path: directory + "/" + name, schema: itemSchema, options: options)
    }

    func openAsync(_ name: String, options: SyncOpenOptions) async -> Result<SyncSession, FerryError> {
        let done = Arrival<Result<SyncSession, FerryError>>()
        app.openSynced(user: user, path: directory + "/" + name, schema: itemSchema, options: options) { done.deliver($0) }
        return await done.wait(seconds: 60) ?? .failure(FerryError(.timeout, "the open did not complete"))
    }
}

/// The connection states a session goes through, recorded from its observer.
final class StateRecorder: @unchecked Sendable {
    let log = EventLog<(ConnectionState, ConnectionState)>()
    private(set) var token: ConnectionStateToken?
    /// The state when the recorder started (a session may already be connected by then).
    let initial: ConnectionState

    init(_ session: SyncSession) {
        let log = self.log
        token = session.observeConnectionState { old, new in log.add((old, new)) }
        initial = session.connectionState
    }

    /// Waits until the `count`th arrival at `state`, counting the state at the start as one.
    func reached(_ state: ConnectionState, times count: Int = 1, seconds: Double = 20) async -> Bool {
        let already = initial == state ? 1 : 0
        return await log.wait(seconds: seconds) { $0.filter { $0.1 == state }.count + already >= count }
    }

    var transitions: [(ConnectionState, ConnectionState)] { log.all }
}

extension SyncSession {
    func subscribe(_ query: String, name: String = "items") async throws {
        let v = try updateSubscriptions { $0.add(name: name, objectType: "Item", query: query) }
        let done = Arrival<FerryError?>()
        waitForSubscriptions(version: v) { done.deliver($0) }
        guard let r = await done.wait() else { throw FerryError(.timeout, "subscription wait timed out") }
        if let e = r { throw e }
    }

    func waitUpload(seconds: Double = 30) async throws {
        let done = Arrival<FerryError?>()
        waitForUpload { done.deliver($0) }
        guard let r = await done.wait(seconds: seconds) else { throw FerryError(.timeout, "upload wait timed out") }
        if let e = r { throw e }
    }

    func waitDownload(seconds: Double = 30) async throws {
        let done = Arrival<FerryError?>()
        waitForDownload { done.deliver($0) }
        guard let r = await done.wait(seconds: seconds) else { throw FerryError(.timeout, "download wait timed out") }
        if let e = r { throw e }
    }

    func createItem(_ id: ObjectId = .generate(), owner: String, name: String, complexity: Int64 = 1) throws {
        try database.beginWrite()
        do {
            try database.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(owner)), (2, .string(name)), (3, .int(complexity))])
            try database.commit()
        } catch {
            try? database.cancel()
            throw error
        }
    }

    func itemNames() throws -> Set<String> {
        Set(try database.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).compactMap { row -> String? in
            if case .string(let s) = row[2] { return s }
            return nil
        })
    }
}

enum AdminAPI {
    static let token = "an-admin-token-for-session-tests"
    static var secrets: [String: String] { ["FERRY_ADMIN_TOKEN": token] }

    /// Calls the admin API (`/api/admin/v1/<path>`) with the admin token.
    static func call(_ url: String, _ method: String, _ path: String) async throws -> HTTPResponse {
        let loop = try EventLoop.acquireShared()
        defer { EventLoop.releaseShared() }
        let done = Arrival<Result<HTTPResponse, FerryError>>()
        let request = HTTPRequest(method: method, url: url + "/api/admin/v1/" + path, headers: [("Authorization", "Bearer \(token)")])
        // Generous: under ThreadSanitizer, with many tests' servers at once, 10 s was not enough.
        loop.post { HTTPClient.send(request, on: loop, tls: TLSOptions(), timeoutMs: 45_000) { done.deliver($0) } }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "the admin API did not answer") }
        return try r.get()
    }

    /// POSTs to the admin API (e.g. `sync/terminate`), failing unless the answer is 2xx.
    static func post(_ url: String, _ path: String) async throws {
        let response = try await call(url, "POST", path)
        guard (200..<300).contains(response.status) else {
            throw FerryError(.sync, "POST \(path): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
        }
    }

    /// The server's open sync connections (GET /api/admin/v1/sync).
    static func connections(_ url: String) async throws -> Int {
        let response = try await call(url, "GET", "sync")
        let json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        guard let n = json?["connections"] as? Int else { throw FerryError(.corrupt, "no connections in \(String(decoding: response.body, as: UTF8.self))") }
        return n
    }

    /// Polls the count until it is `expected` (the server learns of a closed socket a little
    /// after the client closed it), within a deadline.
    static func waitConnections(_ url: String, _ expected: Int, seconds: Double = 20) async throws -> Int {
        let deadline = Date().addingTimeInterval(seconds)
        var n = try await connections(url)
        while n != expected, Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
            n = try await connections(url)
        }
        return n
    }
}

/// A loopback port nothing listens on (bound, then released).
func unusedLoopbackPort() -> Int {
    // Outside the kernel's ephemeral range: a port from inside it is what the OS hands to the
    // suite's other servers (each binds port 0), so one could take it between this check and
    // the test's own bind (a whole-suite run saw "Address already in use"). Below the range
    // only explicit binds compete, and the check below skips a port one of them holds.
    let low = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
        .flatMap { $0.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { Int($0) } } ?? 32_768
    for _ in 0..<100 {
        let candidate = Int.random(in: 10_000..<max(10_001, low))
        if loopbackPortIsFree(candidate) { return candidate }
    }
    return ephemeralLoopbackPort()
}

/// Whether a socket can bind 127.0.0.1:`port` now.
private func loopbackPortIsFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    let len = socklen_t(MemoryLayout<sockaddr_in>.size)
    return withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } } == 0
}

/// A port the OS picks (inside its ephemeral range).
private func ephemeralLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
    _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
    return Int(UInt16(bigEndian: addr.sin_port))
}
