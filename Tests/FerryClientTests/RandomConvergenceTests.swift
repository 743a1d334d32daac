import FerryClient
import FerryCore
import FerryStore
import Foundation
import FerryTestSupport
import Testing

/// Randomized convergence (issue 3, point 15): five devices of one user make random creates,
/// updates, deletes, counter adds and list operations on a few shared objects, in transactions
/// of several operations, going offline and back at random; three of them subscribe to a
/// narrower view than everything (`View.all`), so some writes leave the writer's view and are
/// reverted. After a full sync every device holds exactly what a fresh device downloads of its
/// view (the server's state). A failure prints its seed; replay one seed with
/// `FERRY_CONVERGENCE_SEED=<seed> swift test --filter RandomConvergence`. CI sets
/// `FERRY_CONVERGENCE_SEEDS` (how many seeds) higher than the default. Agreeing with each
/// other is not enough: `devicesEndWithWhatTheHostsCommitted` also checks every device
/// against a sequential model of what the hosts committed.
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

        func rows(_ query: String = "TRUEPREDICATE") throws -> [[UInt8]] {
            try db.query(classIndex: 0, query: query, arguments: []).map { row in row.flatMap { ValueCodec.encode($0) } }.sorted { $0.lexicographicallyPrecedes($1) }
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
        for view in View.all {
            let dir = SyncTestServer.temporaryDirectory("conv")
            let app = try App(App.Configuration(appId: "convergence", baseURL: url, baseDirectory: dir, logLevel: .off))
            let login = Arrival<Result<SyncUser, FerryError>>()
            app.login(.jwt(testJWT(subject: subject))) { login.deliver($0) }
            guard let user = try await login.wait(seconds: 60)?.get() else { throw FerryError(.timeout, "login timed out") }
            let d = try Device(app: app, user: user, path: dir + "/docs.ferry")
            devices.append(d)
            try d.goOnline()
            let v = try d.session!.updateSubscriptions { $0.add(name: "all", objectType: "Doc", query: view.query) }
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
        for (n, d) in devices.dropLast().enumerated() {
            // What the device holds is the server's objects of its view, nothing else.
            let expected = try fresh.rows(View.all[n].query)
            let actual = try d.rows()
            if actual != expected {
                let describe = { (db: Database) in (try? db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).map { "\($0)" }.joined(separator: "\n  ")) ?? "?" }
                throw FerryError(.internal, "device \(n) (\(View.all[n].query)) differs from the server's view.\n device:\n  \(describe(d.db))\n server:\n  \(describe(fresh.db))")
            }
        }
    }

    // MARK: the oracle: what the hosts committed

    /// Devices end with what their hosts committed, not only with the same state as each
    /// other (issue 11, point 3). Five devices of one user, three of them with a narrower view,
    /// write in rounds; in a round each object has at most one writer, and a round ends with
    /// every device online, every upload done and then every download. Transactions make
    /// several operations on one object (create then set, set twice, add then set, list
    /// edits), and some writes leave the writer's view (the server reverts them). A sequential
    /// model applies each transaction's operations to the server's state as the rules of
    /// docs/protocol.md judge it (a write must be in the writer's view before and after, or it
    /// is reverted); after every round each device holds exactly the model's objects of its
    /// view. The devices live through every seed (each seed writes its own keys), which keeps
    /// the CI's 200 seeds to seconds.
    @Test func devicesEndWithWhatTheHostsCommitted() async throws {
        try await SyncTestServer.withServer(appDirectory: SyncTestServer.convergenceAppDirectory) { url in
            let subject = "oracle-\(UInt32.random(in: 0...UInt32.max))"
            var devices: [(device: Device, view: View)] = []
            defer { for d in devices { d.device.goOffline(); d.device.db.close(); d.device.app.close() } }
            for view in View.all {
                let dir = SyncTestServer.temporaryDirectory("oracle")
                let app = try App(App.Configuration(appId: "convergence", baseURL: url, baseDirectory: dir, logLevel: .off))
                let login = Arrival<Result<SyncUser, FerryError>>()
                app.login(.jwt(testJWT(subject: subject))) { login.deliver($0) }
                guard let user = try await login.wait(seconds: 60)?.get() else { throw FerryError(.timeout, "login timed out") }
                let d = try Device(app: app, user: user, path: dir + "/docs.ferry")
                devices.append((d, view))
                try d.goOnline()
                let v = try d.session!.updateSubscriptions { $0.add(name: "view", objectType: "Doc", query: view.query) }
                try await Self.await_("subscription") { d.session!.waitForSubscriptions(version: v, $0) }
            }
            let started = ContinuousClock.now
            var transactions = 0, reverted = 0
            defer {
                if ProcessInfo.processInfo.environment["FERRY_CONVERGENCE_DEBUG"] != nil {
                    print("oracle: \(Self.seeds.count) seeds, \(transactions) transactions (\(reverted) object writes reverted) in \(ContinuousClock.now - started)")
                }
            }
            for seed in Self.seeds {
                do {
                    let (t, r) = try await Self.oracleRun(seed: seed, devices: devices)
                    transactions += t
                    reverted += r
                } catch {
                    Issue.record("seed \(seed) failed: \(error) — replay with FERRY_CONVERGENCE_SEED=\(seed)")
                    return
                }
            }
        }
    }

    /// A device's subscription, and the same predicate in Swift for the model.
    struct View: Sendable {
        let query: String
        let contains: @Sendable (Doc) -> Bool
        static let all = [
            View(query: "TRUEPREDICATE") { _ in true },
            View(query: "rank <= 1") { $0.rank <= 1 },
            View(query: "TRUEPREDICATE") { _ in true },
            View(query: "rank >= 1") { $0.rank >= 1 },
            View(query: "rank == 2") { $0.rank == 2 },
        ]
    }

    /// The model of one Doc (its key and owner aside).
    struct Doc: Equatable, CustomStringConvertible {
        var title: String
        var counter: Int64
        var rank: Int64
        var tags: [String]

        var description: String { "title=\(title) counter=\(counter) rank=\(rank) tags=\(tags)" }

        init(title: String, counter: Int64, rank: Int64, tags: [String]) {
            self.title = title
            self.counter = counter
            self.rank = rank
            self.tags = tags
        }

        /// The model of a device's row.
        init?(row: [FerryValue]?) {
            guard let row, row.count == 6, case .string(let t) = row[2], case .int(let c) = row[3], case .int(let r) = row[4],
                  case .list(let items) = row[5] else { return nil }
            self.init(title: t, counter: c, rank: r, tags: items.map { if case .string(let s) = $0 { s } else { "\($0)" } })
        }

        func row(_ key: FerryValue, owner: String) -> [FerryValue] {
            [key, .string(owner), .string(title), .int(counter), .int(rank), .list(tags.map { .string($0) })]
        }
    }

    enum Operation: CustomStringConvertible {
        case create(Doc), delete, title(String), rank(Int64), add(Int64), insert(Int, String), erase(Int), setTag(Int, String), clear

        var description: String {
            switch self {
            case .create(let d): return "create(\(d))"
            case .delete: return "delete"
            case .title(let t): return "title=\(t)"
            case .rank(let r): return "rank=\(r)"
            case .add(let n): return "counter+=\(n)"
            case .insert(let i, let t): return "tags.insert(\(i), \(t))"
            case .erase(let i): return "tags.erase(\(i))"
            case .setTag(let i, let t): return "tags[\(i)]=\(t)"
            case .clear: return "tags.clear"
            }
        }

        func apply(to doc: inout Doc?) {
            switch self {
            case .create(let d): doc = d
            case .delete: doc = nil
            case .title(let t): doc?.title = t
            case .rank(let r): doc?.rank = r
            case .add(let n): doc?.counter += n
            case .insert(let i, let t): doc?.tags.insert(t, at: i)
            case .erase(let i): doc?.tags.remove(at: i)
            case .setTag(let i, let t): doc?.tags[i] = t
            case .clear: doc?.tags = []
            }
        }

        func apply(to db: Database, key: FerryValue, owner: String) throws {
            switch self {
            case .create(let d):
                try db.create(classIndex: 0, values: [(0, key), (1, .string(owner)), (2, .string(d.title)), (3, .int(d.counter)), (4, .int(d.rank))])
            case .delete: try db.delete(classIndex: 0, key: key)
            case .title(let t): try db.set(classIndex: 0, key: key, property: 2, value: .string(t))
            case .rank(let r): try db.set(classIndex: 0, key: key, property: 4, value: .int(r))
            case .add(let n): try db.addInteger(classIndex: 0, key: key, property: 3, delta: n)
            case .insert(let i, let t): try db.modifyList(classIndex: 0, key: key, property: 5, .insert(i, .string(t)))
            case .erase(let i): try db.modifyList(classIndex: 0, key: key, property: 5, .erase(i))
            case .setTag(let i, let t): try db.modifyList(classIndex: 0, key: key, property: 5, .set(i, .string(t)))
            case .clear: try db.modifyList(classIndex: 0, key: key, property: 5, .clear)
            }
        }
    }

    /// One to four operations on an object the writer sees as `start`, each valid on the
    /// object as the previous ones left it.
    static func randomOperations(from start: Doc?, rng: inout SplitMix64) -> [Operation] {
        let words = ["red", "green", "blue", "amber", "teal"]
        var doc = start
        var ops: [Operation] = []
        for _ in 0..<(1 + rng.next(4)) {
            let op: Operation
            if let d = doc {
                let count = d.tags.count
                switch rng.next(12) {
                case 0: op = .delete
                case 1, 2: op = .title(words[rng.next(5)] + "\(rng.next(100))")
                case 3, 4: op = .rank(Int64(rng.next(4)))
                case 5, 6: op = .add(Int64(rng.next(7)) - 3)
                case 7, 8: op = .insert(rng.next(count + 1), words[rng.next(5)])
                case 9: op = count > 0 ? .erase(rng.next(count)) : .insert(0, words[rng.next(5)])
                case 10: op = count > 0 ? .setTag(rng.next(count), words[rng.next(5)]) : .title("t\(rng.next(100))")
                default: op = .clear
                }
            } else {
                op = .create(Doc(title: words[rng.next(5)], counter: Int64(rng.next(10)), rank: Int64(rng.next(4)), tags: []))
            }
            op.apply(to: &doc)
            ops.append(op)
        }
        return ops
    }

    /// Returns the number of transactions made and of object writes the server reverted.
    static func oracleRun(seed: UInt64, devices: [(device: Device, view: View)]) async throws -> (Int, Int) {
        var rng = SplitMix64(seed: seed)
        let owner = devices[0].device.user.id
        // Primary keys are global on the server: each run of a seed has its own.
        let run = UInt32.random(in: 0...UInt32.max)
        let keys = (0..<6).map { FerryValue.string("o\(seed)-\(run)-k\($0)") }
        /// The server's objects as the rules decide them.
        var model: [FerryValue: Doc] = [:]
        var log: [String] = []
        var transactions = 0, revertedWrites = 0
        for round in 0..<4 {
            // Each key gets at most one writer this round.
            var writer: [FerryValue: Int] = [:]
            for k in keys where rng.next(5) > 0 { writer[k] = rng.next(devices.count) }
            for (n, (d, view)) in devices.enumerated() {
                if rng.next(4) == 0 { d.goOffline() } else { try d.goOnline() }
                // A key whose write the server reverts is not written again before the round ends.
                var reverted: Set<FerryValue> = []
                for _ in 0..<rng.next(4) {
                    let mine = keys.filter { writer[$0] == n && !reverted.contains($0) }
                    guard !mine.isEmpty else { break }
                    var chosen = [mine[rng.next(mine.count)]]
                    if mine.count > 1 && rng.next(3) == 0, let other = mine.first(where: { $0 != chosen[0] }) { chosen.append(other) }
                    var judged: [(FerryValue, Doc?, Bool)] = []
                    try d.db.beginWrite()
                    do {
                        for k in chosen {
                            let before = model[k]
                            let seen = before.flatMap { view.contains($0) ? $0 : nil }
                            let ops = randomOperations(from: seen, rng: &rng)
                            var after = seen
                            for op in ops {
                                try op.apply(to: d.db, key: k, owner: owner)
                                op.apply(to: &after)
                            }
                            // The server judges the object before (its state) and after the writes.
                            let allowed = (before.map(view.contains) ?? true) && (after.map(view.contains) ?? true)
                            judged.append((k, after, allowed))
                            log.append("round \(round) device \(n): \(k.keyText) \(ops.map(\.description).joined(separator: ", "))\(allowed ? "" : " (reverted)")")
                        }
                        try d.db.commit()
                    } catch {
                        try? d.db.cancel()
                        throw FerryError(.internal, "device \(n) could not make a write its own state allowed (\(error)); it does not hold what it committed:\n\(log.joined(separator: "\n"))")
                    }
                    transactions += 1
                    for (k, after, allowed) in judged {
                        if allowed { model[k] = after } else { reverted.insert(k); revertedWrites += 1 }
                    }
                }
            }
            for (d, _) in devices { try d.goOnline() }
            for (d, _) in devices { try await await_("upload") { d.session!.waitForUpload($0) } }
            for (d, _) in devices { try await await_("download") { d.session!.waitForDownload($0) } }
            for (n, (d, view)) in devices.enumerated() {
                for k in keys {
                    let expected = model[k].flatMap { view.contains($0) ? $0.row(k, owner: owner) : nil }
                    let actual = try d.db.object(classIndex: 0, key: k)
                    if actual != expected {
                        let held = actual.map { Doc(row: $0).map { "\($0)" } ?? "\($0)" } ?? "nothing"
                        throw FerryError(.internal, "after round \(round), device \(n) (\(view.query)) holds \(k.keyText) as \(held) where its host's writes make \(model[k].map { "\($0)" } ?? "nothing")\(expected == nil && model[k] != nil ? " (outside its view)" : ""):\n\(log.joined(separator: "\n"))")
                    }
                }
            }
        }
        return (transactions, revertedWrites)
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

