import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Randomized convergence (issue 3, point 15): five devices of one user make random creates,
/// updates, deletes, counter adds and list operations on a few shared objects, going offline
/// and back at random; after a full sync every device holds exactly what a fresh device
/// downloads (the server's view). A failure prints its seed; replay one seed with
/// `FERRY_CONVERGENCE_SEED=<seed> swift test --filter RandomConvergence`. CI sets
/// `FERRY_CONVERGENCE_SEEDS` (how many seeds) higher than the default.
@Suite("Randomized convergence", .serialized)
struct RandomConvergenceTests {
    static let docSchema: Schema = {
        let os = try! ObjectSchema(name: "Doc", properties: [
            Property(name: "_id", type: .string, isPrimaryKey: true),
            Property(name: "ownerId", type: .string),
            Property(name: "title", type: .string),
            Property(name: "counter", type: .int),
            Property(name: "rank", type: .int),
            Property(name: "tags", type: .string, isList: true),
        ])
        return try! Schema([os])
    }()

    static var seeds: [UInt64] {
        let env = ProcessInfo.processInfo.environment
        if let one = env["FERRY_CONVERGENCE_SEED"].flatMap(UInt64.init) { return [one] }
        let count = env["FERRY_CONVERGENCE_SEEDS"].flatMap(Int.init) ?? 12
        let base = env["FERRY_CONVERGENCE_BASE"].flatMap(UInt64.init) ?? UInt64.random(in: 1...1_000_000)
        return (0..<UInt64(count)).map { base + $0 }
    }

    @Test func devicesConvergeOnTheServersView() async throws {
        try await SyncTestServer.withServer(appDirectory: SyncTestServer.convergenceAppDirectory) { url in
            for seed in Self.seeds {
                do {
                    try await Self.run(seed: seed, url: url)
                } catch {
                    Issue.record("seed \(seed) failed: \(error) — replay with FERRY_CONVERGENCE_SEED=\(seed)")
                    return
                }
            }
        }
    }

    /// One device: an App and a synced file; `session` is nil while offline.
    final class Device {
        let app: App
        let user: SyncUser
        let path: String
        var session: SyncSession?
        let db: Database

        init(app: App, user: SyncUser, path: String) throws {
            self.app = app
            self.user = user
            self.path = path
            // The device's own handle stays open offline too (writes go on locally).
            db = try Database.open(DatabaseConfiguration(location: .file(path), schema: RandomConvergenceTests.docSchema, synced: true), scheduler: PollingScheduler())
        }

        func goOnline() throws {
            guard session == nil else { return }
            session = try app.openSynced(user: user, path: path, schema: RandomConvergenceTests.docSchema)
        }

        func goOffline() {
            session?.close()
            session = nil
        }

        func rows() throws -> [[UInt8]] {
            try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).map { row in row.flatMap { ValueCodec.encode($0) } }.sorted { $0.lexicographicallyPrecedes($1) }
        }
    }

    static func await_(_ what: String, _ start: (@escaping @Sendable (FerryError?) -> Void) -> Void) async throws {
        let done = Arrival<FerryError?>()
        start { done.deliver($0) }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "\(what) timed out") }
        if let e = r { throw e }
    }

    static func run(seed: UInt64, url: String) async throws {
        var rng = SplitMix64(seed: seed)
        let subject = "conv-\(seed)-\(UInt32.random(in: 0...UInt32.max))"
        var devices: [Device] = []
        defer { for d in devices { d.goOffline(); d.db.close(); d.app.close() } }
        for _ in 0..<5 {
            let dir = SyncTestServer.temporaryDirectory("conv")
            let app = try App(App.Configuration(appId: "convergence", baseURL: url, baseDirectory: dir, logLevel: .off))
            let login = Arrival<Result<SyncUser, FerryError>>()
            app.login(.jwt(testJWT(subject: subject))) { login.deliver($0) }
            guard let user = try await login.wait(seconds: 60)?.get() else { throw FerryError(.timeout, "login timed out") }
            let d = try Device(app: app, user: user, path: dir + "/docs.ferry")
            devices.append(d)
            try d.goOnline()
            let v = try d.session!.updateSubscriptions { $0.add(name: "all", objectType: "Doc", query: "TRUEPREDICATE") }
            try await await_("subscription") { d.session!.waitForSubscriptions(version: v, $0) }
        }
        let owner = devices[0].user.id
        if ProcessInfo.processInfo.environment["FERRY_CONVERGENCE_DEBUG"] != nil { print("users:", devices.map(\.user.id)) }
        // Primary keys are global on the server (as _id in a collection): each seed has its own.
        let keys = (0..<6).map { FerryValue.string("s\(seed)-k\($0)") }
        for _ in 0..<8 {
            for d in devices {
                if rng.next(100) < 20 { d.session == nil ? try d.goOnline() : d.goOffline() }
                for _ in 0..<(1 + rng.next(3)) {
                    try d.db.beginWrite()
                    for _ in 0..<(1 + rng.next(3)) { try randomOperation(d.db, keys: keys, owner: owner, rng: &rng) }
                    try d.db.commit()
                }
            }
        }
        // Everyone online; everything uploaded; then everything downloaded.
        for d in devices { try d.goOnline() }
        for d in devices { try await await_("upload") { d.session!.waitForUpload($0) } }
        for d in devices { try await await_("download") { d.session!.waitForDownload($0) } }
        // A fresh device downloads the server's view.
        let dir = SyncTestServer.temporaryDirectory("conv-fresh")
        let app = try App(App.Configuration(appId: "convergence", baseURL: url, baseDirectory: dir, logLevel: .off))
        let login = Arrival<Result<SyncUser, FerryError>>()
        app.login(.jwt(testJWT(subject: subject))) { login.deliver($0) }
        guard let user = try await login.wait(seconds: 60)?.get() else { throw FerryError(.timeout, "login timed out") }
        let fresh = try Device(app: app, user: user, path: dir + "/docs.ferry")
        devices.append(fresh)
        try fresh.goOnline()
        let v = try fresh.session!.updateSubscriptions { $0.add(name: "all", objectType: "Doc", query: "TRUEPREDICATE") }
        try await await_("fresh subscription") { fresh.session!.waitForSubscriptions(version: v, $0) }
        let expected = try fresh.rows()
        for (n, d) in devices.dropLast().enumerated() {
            let actual = try d.rows()
            if actual != expected {
                let describe = { (db: Database) in (try? db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).map { "\($0)" }.joined(separator: "\n  ")) ?? "?" }
                throw FerryError(.internal, "device \(n) differs from the server's view.\n device:\n  \(describe(d.db))\n server:\n  \(describe(fresh.db))")
            }
        }
    }

    /// One random write; writes that do not apply locally (no such object, index out of range)
    /// are skipped, as a host would not make them.
    static func randomOperation(_ db: Database, keys: [FerryValue], owner: String, rng: inout SplitMix64) throws {
        let key = keys[rng.next(keys.count)]
        let current = try db.object(classIndex: 0, key: key)
        let words = ["red", "green", "blue", "amber", "teal"]
        guard let row = current else {
            let values: [(Int, FerryValue)] = [(0, key), (1, .string(owner)), (2, .string(words[rng.next(5)])), (3, .int(Int64(rng.next(10)))), (4, .int(Int64(rng.next(4))))]
            try db.create(classIndex: 0, values: values)
            for i in 0..<rng.next(3) { try db.modifyList(classIndex: 0, key: key, property: 5, .insert(i, .string(words[rng.next(5)]))) }
            return
        }
        var count = 0
        if case .list(let items) = row[5] { count = items.count }
        switch rng.next(10) {
        case 0: try db.delete(classIndex: 0, key: key)
        case 1, 2: try db.set(classIndex: 0, key: key, property: 2, value: .string(words[rng.next(5)] + "\(rng.next(100))"))
        case 3: try db.set(classIndex: 0, key: key, property: 4, value: .int(Int64(rng.next(4))))
        case 4, 5: try db.addInteger(classIndex: 0, key: key, property: 3, delta: Int64(rng.next(7)) - 3)
        case 6, 7: try db.modifyList(classIndex: 0, key: key, property: 5, .insert(rng.next(count + 1), .string(words[rng.next(5)])))
        case 8: if count > 0 { try db.modifyList(classIndex: 0, key: key, property: 5, .erase(rng.next(count))) }
        default:
            if count > 0 && rng.next(4) > 0 { try db.modifyList(classIndex: 0, key: key, property: 5, .set(rng.next(count), .string(words[rng.next(5)])) ) }
            else { try db.modifyList(classIndex: 0, key: key, property: 5, .clear) }
        }
    }
}

/// A small seeded generator, so a failing run can be replayed exactly.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func nextRaw() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func next(_ bound: Int) -> Int { Int(nextRaw() % UInt64(max(bound, 1))) }
}
