import FerryAppConfig
import FerryCore
import Foundation
import Logging
import FerryTestSupport
import Testing
@testable import FerryServer

/// Issue 22, point 1: a fuzzer of the server's *handling* of messages, not only of their
/// decoding. It drives an in-process `SyncHub` (with its telemetry and sync log, where a
/// session id of 2^63 once trapped) from several connections of several users with seeded
/// random sequences of every message kind: integers at the edges (0, 1, 2^63-1, 2^63, 2^64-1
/// and random ones), valid, invalid and hostile subscriptions, valid and mutated changesets.
/// Each message first goes through the codec, as it does behind the socket (a message the
/// decoder refuses ends a connection there, so it is dropped here).
///
/// Structure-aware and seeded, not coverage-guided: the hub needs the server's dependencies,
/// which the libFuzzer binary (fuzz/run.sh) does not build. `FERRY_HUB_FUZZ_SEEDS` sets the
/// number of seeds (CI runs the default; `FERRY_HUB_FUZZ_SEEDS=2000` for a long run); a failure
/// prints its seed, and `FERRY_HUB_FUZZ_SEED=N` replays one.
///
/// What it checks: no trap; every message the hub sends decodes (its integers are in the
/// protocol's range); and after every sequence the hub still syncs a well-behaved device.
@Suite("Server: the hub fuzzed with hostile message sequences")
struct HubMessageFuzzTests {
    /// The seeded generator (FerryTestSupport), so a failing seed replays exactly.
    typealias Random = SplitMix64

    static let edges: [UInt64] = [0, 1, 2, 3, UInt64(Int64.max) - 1, UInt64(Int64.max), UInt64(Int64.max) + 1, UInt64.max]

    static func integer(_ r: inout Random) -> UInt64 {
        switch r.next(4) {
        case 0: return r.pick(edges)
        case 1: return r.next()
        default: return UInt64(r.next(6))  // small: the ids a session really has
        }
    }

    static let queries = ["complexity >= 0", "TRUEPREDICATE", "ownerId == $0", "complexity < 3 AND itemName BEGINSWITH 'a'",
                          "nosuchfield == 1", "complexity >", "", String(repeating: "(", count: 400), "complexity IN {1, 2, 3}"]

    static func subscriptions(_ r: inout Random) -> [Subscription] {
        (0..<r.next(4)).map { i in
            Subscription(name: r.chance(80) ? "s\(i)" : "", objectType: r.chance(85) ? "Item" : r.pick(["NoSuchClass", "", "item"]),
                         query: r.pick(queries))
        }
    }

    /// A changeset: a valid write (create, set, erase, list change) of one of a few keys, owned by
    /// this user or another, or random bytes, or a valid one with some bytes changed.
    static func changeset(_ r: inout Random, userIds: [String]) -> [UInt8] {
        let last = UInt8(r.next(4))
        let key = FerryValue.objectId(try! ObjectId(bytes: [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, last]))
        let owner = FerryValue.string(r.pick(userIds))
        let instruction: Instruction
        switch r.next(5) {
        case 0, 1: instruction = .create(table: "Item", key: key, fields: [
            FieldValue(name: "ownerId", value: owner), FieldValue(name: "itemName", value: .string("n\(r.next(9))")),
            FieldValue(name: "complexity", value: .int(Int64(bitPattern: integer(&r)))),
        ])
        case 2: instruction = .set(table: "Item", key: key, field: r.pick(["complexity", "itemName", "ownerId", "nosuch"]), value: r.pick([.int(1), .string("x"), owner, .null]))
        case 3: instruction = .erase(table: "Item", key: key)
        default: instruction = .addInteger(table: "Item", key: key, field: "complexity", delta: Int64(bitPattern: integer(&r)))
        }
        var bytes = ChangesetCodec.encode(Changeset(timestamp: Int64(bitPattern: integer(&r)), instructions: [instruction]))
        if r.chance(15) {
            for _ in 0..<(1 + r.next(3)) { bytes[r.next(bytes.count)] = UInt8(truncatingIfNeeded: r.next()) }
        } else if r.chance(5) {
            bytes = (0..<r.next(40)).map { _ in UInt8(truncatingIfNeeded: r.next()) }
        }
        return bytes
    }

    static func message(_ r: inout Random, userIds: [String]) -> ProtocolMessage {
        let session = r.chance(70) ? UInt64(1 + r.next(3)) : integer(&r)
        switch r.next(12) {
        case 0, 1: return .bind(session: session, database: "items", clientFileIdent: r.chance(60) ? 0 : integer(&r), clientFileSalt: integer(&r),
                                lastServerVersion: r.chance(50) ? 0 : integer(&r))
        case 2, 3: return .query(session: session, version: integer(&r), subscriptions: subscriptions(&r))
        case 4, 5, 6: return .upload(session: session, changesets: (0..<(1 + r.next(3))).map { _ in
            UploadChangeset(clientVersion: integer(&r), lastIntegratedServerVersion: integer(&r), changeset: changeset(&r, userIds: userIds))
        })
        case 7: return .mark(session: session, request: integer(&r))
        case 8: return .unbind(session: session)
        case 9: return .ping(timestamp: integer(&r))
        default:
            // A server-only kind: refused, the connection closed.
            switch r.next(4) {
            case 0: return .ident(session: session, clientFileIdent: integer(&r), clientFileSalt: integer(&r))
            case 1: return .pong(timestamp: integer(&r))
            case 2: return .error(ProtocolError(session: session, code: 201, message: "x", tryAgain: false, action: .warning))
            default: return .download(session: session, serverVersion: integer(&r), uploadAcknowledged: integer(&r), subscriptionVersion: integer(&r),
                                      downloadableBytes: integer(&r), isLastInBatch: r.chance(50), changesets: [])
            }
        }
    }

    /// Reads an outbox until it closes, checking every frame the hub queued decodes.
    static func drain(_ outbox: ConnectionOutbox) -> Task<[ProtocolMessage], Never> {
        Task {
            var received: [ProtocolMessage] = []
            while let frame = await outbox.next() {
                do { received.append(try ProtocolCodec.decode(frame)) } catch {
                    Issue.record("the hub sent a message that does not decode: \(error)")
                }
            }
            return received
        }
    }

    @Test func hostileSequencesNeitherTrapNorBreakTheHub() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds: [UInt64] = environment["FERRY_HUB_FUZZ_SEED"].flatMap(UInt64.init).map { [$0] }
            ?? Array(0..<UInt64(environment["FERRY_HUB_FUZZ_SEEDS"].flatMap(Int.init) ?? 100))
        let config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                         dataDirectory: NSTemporaryDirectory() + "ferry-hub-fuzz-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(atPath: config.dataDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: config.dataDirectory) }
        var logger = Logger(label: "hub-fuzz")
        logger.logLevel = .critical
        let store = try await ServerStore.open(config, logger: logger)
        let metrics = ServerMetrics()
        let syncLog = SyncLogRecorder(node: "fuzz", storage: store.operations, retention: config.syncLogRetention, metrics: metrics, logger: logger)
        let writer = Task { await syncLog.run() }
        let telemetry = SyncTelemetry(node: "fuzz", metrics: metrics, live: LiveConnections(), log: syncLog)
        let app = try AppDirectory.load(config.appDirectory)
        let hub = try await SyncHub(app: app, storage: store.sync, directory: store.users, logger: logger, events: ServerEventLog(),
                                    limits: SyncLimits(viewEvaluationSeconds: 5), telemetry: telemetry)
        let userIds = ["fuzz-a", "fuzz-b"]
        for seed in seeds {
            var r = Random(seed: seed)
            // Two or three connections of the two users, their messages interleaved.
            var connections: [(outbox: ConnectionOutbox, drained: Task<[ProtocolMessage], Never>)] = []
            for i in 0..<(2 + r.next(2)) {
                let outbox = await hub.openConnection(user: UserContext(id: userIds[i % 2]))
                connections.append((outbox, Self.drain(outbox)))
            }
            for _ in 0..<(20 + r.next(40)) {
                let c = connections[r.next(connections.count)]
                let m = Self.message(&r, userIds: userIds)
                // As the socket would: what the codec refuses never reaches the hub.
                guard let decoded = try? ProtocolCodec.decode(ProtocolCodec.encode(m)) else { continue }
                if m.hasIntegerAbove(ProtocolCodec.maxInteger) { Issue.record("seed \(seed): the codec let \(m) through") }
                guard !c.outbox.isClosed else { continue }
                await hub.receive(decoded, from: c.outbox)
            }
            for c in connections {
                await hub.closeConnection(c.outbox)
                _ = await c.drained.value
            }
            // The hub still syncs a well-behaved device: bind, subscribe, upload, acknowledged.
            let device = await hub.openConnection(user: UserContext(id: "fuzz-a"))
            let drained = Self.drain(device)
            await hub.receive(.bind(session: 1, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0), from: device)
            await hub.receive(.query(session: 1, version: 1, subscriptions: [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")]), from: device)
            let write = ChangesetCodec.encode(Changeset(timestamp: 1, instructions: [.create(table: "Item", key: .objectId(ObjectId.generate(secondsSinceEpoch: 1)), fields: [
                FieldValue(name: "ownerId", value: .string("fuzz-a")), FieldValue(name: "itemName", value: .string("ok")), FieldValue(name: "complexity", value: .int(1)),
            ])]))
            await hub.receive(.upload(session: 1, changesets: [UploadChangeset(clientVersion: 1, lastIntegratedServerVersion: 0, changeset: write)]), from: device)
            await hub.receive(.mark(session: 1, request: 9), from: device)
            await hub.closeConnection(device)
            let answers = await drained.value
            let acknowledged = answers.contains { if case .download(1, _, let ack, _, _, _, _) = $0 { return ack == 1 }; return false }
            #expect(acknowledged, "seed \(seed): after the sequence a device's upload was not acknowledged: \(answers.map { "\($0)".prefix(80) })")
            #expect(answers.contains(.mark(session: 1, request: 9)), "seed \(seed): after the sequence a device's MARK was not answered")
        }
        syncLog.stop()
        await writer.value
        await store.close()
    }
}

extension ProtocolMessage {
    /// Whether any integer field is above `limit` (what the codec must refuse).
    func hasIntegerAbove(_ limit: UInt64) -> Bool {
        let fields: [UInt64]
        switch self {
        case let .bind(s, _, i, salt, v, a): fields = [s, i, salt, v] + (a.map { [$0] } ?? [])
        case let .ident(s, i, salt): fields = [s, i, salt]
        case let .query(s, v, _): fields = [s, v]
        case let .upload(s, cs): fields = [s] + cs.flatMap { [$0.clientVersion, $0.lastIntegratedServerVersion] }
        case let .download(s, v, a, sv, d, _, cs): fields = [s, v, a, sv, d] + cs.flatMap { [$0.serverVersion, $0.originFileIdent] }
        case let .mark(s, r): fields = [s, r]
        case let .unbind(s): fields = [s]
        case let .error(e): fields = [e.session]
        case let .ping(t), let .pong(t): fields = [t]
        case let .writeRules(s, _): fields = [s]
        }
        return fields.contains { $0 > limit }
    }
}
