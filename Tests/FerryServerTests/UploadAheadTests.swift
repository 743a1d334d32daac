import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import Testing
@testable import FerryServer

/// Issue 23: a connection's next upload is decoded and merged while its previous upload
/// commits (`SyncHub.prepareAhead`), and that merge is committed only if it is still what a
/// merge in its own turn would give. The pure parts (`RecentCommits`, `UploadIntegration.
/// splitsAlike`) are tested on values; the hub's use of them on an in-process hub driven in a
/// fixed order: the ahead merge made before the previous upload commits, then both uploads
/// handled, and the store compared with what the device wrote.
@Suite("Server: uploads merged ahead of their turn")
struct UploadAheadTests {
    static func key(_ n: Int) -> ObjectKey {
        ObjectKey(table: "Item", key: .objectId(ObjectId.generate(secondsSinceEpoch: UInt32(1_000 + n))))
    }

    // MARK: RecentCommits

    @Test func ownCommitsThatWroteOtherKeysVouchForARead() {
        var recent = RecentCommits()
        let (a, b, c) = (Self.key(1), Self.key(2), Self.key(3))
        recent.record(before: 10, after: 11, written: [a])
        recent.record(before: 11, after: 12, written: [b])
        #expect(recent.untouched([c], after: 10, through: 12))
        #expect(recent.untouched([c], after: 11, through: 12))
        #expect(recent.untouched([a, b], after: 12, through: 12), "no commit since the read")
        #expect(!recent.untouched([b], after: 10, through: 12), "version 12 wrote b")
        #expect(!recent.untouched([a, c], after: 10, through: 11), "version 11 wrote a")
        #expect(recent.untouched([b], after: 10, through: 11), "b was written after the head the caller is at")
    }

    @Test func aVersionThisNodeDidNotRecordProvesNothing() {
        var recent = RecentCommits()
        let (a, c) = (Self.key(1), Self.key(3))
        recent.record(before: 10, after: 11, written: [a])
        // Version 12 was another node's: nothing of it is known here.
        recent.record(before: 12, after: 13, written: [a])
        #expect(!recent.untouched([c], after: 10, through: 13))
        #expect(!recent.untouched([c], after: 9, through: 11), "version 10 is not recorded")
        #expect(!recent.untouched([c], after: 11, through: 10), "a head behind the read")
        #expect(recent.untouched([c], after: 12, through: 13))
    }

    @Test func theRecordIsBoundedByCommitsAndKeys() {
        var recent = RecentCommits(maxCommits: 2, maxKeys: 3)
        let keys = (0..<5).map(Self.key)
        recent.record(before: 1, after: 2, written: [keys[0]])
        recent.record(before: 2, after: 3, written: [keys[1]])
        recent.record(before: 3, after: 4, written: [keys[2]])
        #expect(!recent.untouched([keys[4]], after: 1, through: 4), "the oldest commit was dropped")
        #expect(recent.untouched([keys[4]], after: 2, through: 4))
        recent.record(before: 4, after: 5, written: [keys[3], keys[0], keys[1]])
        #expect(!recent.untouched([keys[4]], after: 3, through: 5), "past 3 keys the older commit was dropped")
        #expect(recent.untouched([keys[4]], after: 4, through: 5))
        // A commit of more keys than the bound is not kept, and what came before it is no
        // longer a chain: nothing is vouched for.
        recent.record(before: 5, after: 6, written: keys)
        #expect(!recent.untouched([Self.key(9)], after: 4, through: 6))
        #expect(!recent.untouched([Self.key(9)], after: 5, through: 6))
    }

    // MARK: UploadIntegration.splitsAlike

    let app = try! AppDirectory.load(AuthAPITests.example)

    func changeset(_ version: UInt64, _ instructions: [Instruction]) -> UploadChangeset {
        UploadChangeset(clientVersion: version, lastIntegratedServerVersion: 0,
                        changeset: ChangesetCodec.encode(Changeset(timestamp: 1_000, instructions: instructions)))
    }

    func integration(acknowledged: UInt64, _ versions: [UInt64]) throws -> UploadIntegration {
        let user = UserContext(id: "alice")
        let view = try SessionView.make([Subscription(name: "s", objectType: "Item", query: "complexity >= 0")], user: user, app: app,
                                        schema: try app.schema).get()
        let changesets = versions.map { changeset($0, [.erase(table: "Item", key: Self.key(Int($0)).key)]) }
        return try UploadIntegration(session: 1, clientFile: 7, user: user, view: view, app: app, schema: try app.schema,
                                     acknowledged: acknowledged, changesets: changesets)
    }

    @Test func anUploadSplitsAlikeOnlyWhenNoChangesetLiesBetweenTheTwoAcknowledgements() throws {
        let upload = try integration(acknowledged: 2, [5, 6])
        #expect(upload.splitsAlike(acknowledged: 2))
        #expect(upload.splitsAlike(acknowledged: 4), "the previous upload (3, 4) was acknowledged meanwhile")
        #expect(!upload.splitsAlike(acknowledged: 5), "changeset 5 is then already acknowledged")
        #expect(try integration(acknowledged: 4, [3, 5]).splitsAlike(acknowledged: 3))
        #expect(!(try integration(acknowledged: 4, [3, 5]).splitsAlike(acknowledged: 2)), "changeset 3 is then fresh")
        // Nothing fresh: the outcome's acknowledged version is the acknowledgement itself.
        #expect(!(try integration(acknowledged: 4, [3, 4]).splitsAlike(acknowledged: 5)))
    }

    // MARK: The hub

    /// An in-process hub on a fresh SQLite store with one bound, subscribed session of user
    /// "ahead-a" (every Item with a complexity of 0 or more), merging every upload outside the lock.
    struct Hub {
        let hub: SyncHub
        let store: ServerStore
        let metrics: ServerMetrics
        let device: ConnectionOutbox
        let received: Task<[ProtocolMessage], Never>
        let directory: String
        let owner = "ahead-a"

        static func start() async throws -> Hub {
            let config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                             dataDirectory: NSTemporaryDirectory() + "ferry-upload-ahead-\(UInt64.random(in: 0...UInt64.max))")
            try FileManager.default.createDirectory(atPath: config.dataDirectory, withIntermediateDirectories: true)
            var logger = Logger(label: "upload-ahead")
            logger.logLevel = .critical
            let store = try await ServerStore.open(config, logger: logger)
            let metrics = ServerMetrics()
            let telemetry = SyncTelemetry(node: "ahead", metrics: metrics, live: LiveConnections(), log: nil)
            var limits = SyncLimits()
            limits.premergeFromInstructions = 1
            let hub = try await SyncHub(app: try AppDirectory.load(config.appDirectory), storage: store.sync, directory: store.users, logger: logger,
                                        events: ServerEventLog(), limits: limits, telemetry: telemetry)
            let device = await hub.openConnection(user: UserContext(id: "ahead-a"))
            let received = HubMessageFuzzTests.drain(device)
            await hub.receive(.bind(session: 1, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0), from: device)
            await hub.receive(.query(session: 1, version: 1, subscriptions: [Subscription(name: "mine", objectType: "Item", query: "complexity >= 0")]), from: device)
            return Hub(hub: hub, store: store, metrics: metrics, device: device, received: received, directory: config.dataDirectory)
        }

        func upload(_ version: UInt64, _ instructions: [Instruction]) -> ProtocolMessage {
            .upload(session: 1, changesets: [UploadChangeset(clientVersion: version, lastIntegratedServerVersion: 0,
                                                             changeset: ChangesetCodec.encode(Changeset(timestamp: 1_000, instructions: instructions)))])
        }

        func create(_ key: ObjectKey, complexity: Int64) -> Instruction {
            .create(table: "Item", key: key.key, fields: [FieldValue(name: "ownerId", value: .string(owner)), FieldValue(name: "itemName", value: .string("ahead")),
                                                          FieldValue(name: "complexity", value: .int(complexity))])
        }

        /// The second upload merged ahead, before the first is handled; then both in order.
        func handleSecondMergedAhead(_ first: ProtocolMessage, _ second: ProtocolMessage) async throws -> PreparedUpload {
            guard case .upload(let session, let changesets) = second else { throw CancellationError() }
            let prepared = await hub.prepareAhead(session: session, changesets, from: device)
            #expect(prepared?.ahead != nil, "the second upload was not merged ahead")
            await hub.receive(first, from: device)
            await hub.receive(second, prepared: prepared, from: device)
            return prepared!
        }

        /// Complexity by key, as stored.
        func complexities(_ keys: [ObjectKey]) async throws -> [ObjectKey: FerryValue] {
            let schema = try AppDirectory.load(AuthAPITests.example).schema
            let index = schema.objectSchema(named: "Item")!.properties.firstIndex { $0.name == "complexity" }!
            var out: [ObjectKey: FerryValue] = [:]
            for (k, stored) in try await store.sync.objects(keys, schema: schema) { if let o = stored.object { out[k] = o.values[index] } }
            return out
        }

        func premerges(ahead: Bool, used: Bool) -> Int {
            let text = String(decoding: metrics.render(), as: UTF8.self)
            let series = "ferry_upload_premerges_total{ahead=\"\(ahead)\",outcome=\"\(used ? "used" : "merged_again")\"} "
            return text.split(separator: "\n").first { $0.hasPrefix(series) }.flatMap { Int($0.dropFirst(series.count)) } ?? -1
        }

        /// The highest client version the device was told is acknowledged.
        func close() async -> UInt64 {
            await hub.closeConnection(device)
            let answers = await received.value
            await store.close()
            try? FileManager.default.removeItem(atPath: directory)
            return answers.reduce(0) { if case .download(1, _, let ack, _, _, _, _) = $1 { max($0, ack) } else { $0 } }
        }
    }

    @Test func aMergeAheadOfOtherObjectsIsCommittedAsMade() async throws {
        let h = try await Hub.start()
        let first = (0..<20).map(Self.key), second = (20..<40).map(Self.key)
        _ = try await h.handleSecondMergedAhead(h.upload(1, first.map { h.create($0, complexity: 1) }),
                                                h.upload(2, second.map { h.create($0, complexity: 2) }))
        let stored = try await h.complexities(first + second)
        #expect(first.allSatisfy { stored[$0] == .int(1) } && second.allSatisfy { stored[$0] == .int(2) }, "\(stored.count) objects stored")
        #expect(h.premerges(ahead: true, used: true) == 1, "the merge made ahead was not the one committed")
        #expect(h.premerges(ahead: true, used: false) == 0)
        #expect(await h.close() == 2)
    }

    /// The ahead merge read the objects before the previous upload created them: committed as
    /// made, it would have applied the increments to missing objects (nothing) and then
    /// overwritten the created state with its own.
    @Test func aMergeAheadOfObjectsThePreviousUploadWroteIsMergedAgain() async throws {
        let h = try await Hub.start()
        let keys = (0..<20).map(Self.key)
        _ = try await h.handleSecondMergedAhead(h.upload(1, keys.map { h.create($0, complexity: 1) }),
                                                h.upload(2, keys.map { .addInteger(table: "Item", key: $0.key, field: "complexity", delta: 10) }))
        let stored = try await h.complexities(keys)
        #expect(keys.allSatisfy { stored[$0] == .int(11) }, "\(keys.map { stored[$0].map { "\($0)" } ?? "missing" })")
        #expect(h.premerges(ahead: true, used: false) == 1)
        #expect(h.premerges(ahead: true, used: true) == 0)
        #expect(await h.close() == 2)
    }

    /// The second upload resends the first's changeset (as a device that missed an
    /// acknowledgement does) with a new one: merged ahead, the resent increment was still
    /// fresh; once the first is acknowledged it is not, and it must not count twice.
    @Test func aMergeAheadWhoseChangesetsTheAcknowledgementOvertookIsMergedAgain() async throws {
        let h = try await Hub.start()
        let keys = (0..<20).map(Self.key)
        await h.hub.receive(h.upload(1, keys.map { h.create($0, complexity: 1) }), from: h.device)
        let increments = ChangesetCodec.encode(Changeset(timestamp: 1_000, instructions: keys.map { .addInteger(table: "Item", key: $0.key, field: "complexity", delta: 10) }))
        let more = ChangesetCodec.encode(Changeset(timestamp: 1_001, instructions: keys.map { .set(table: "Item", key: $0.key, field: "itemName", value: .string("again")) }))
        let first = ProtocolMessage.upload(session: 1, changesets: [UploadChangeset(clientVersion: 2, lastIntegratedServerVersion: 0, changeset: increments)])
        let second = ProtocolMessage.upload(session: 1, changesets: [UploadChangeset(clientVersion: 2, lastIntegratedServerVersion: 0, changeset: increments),
                                                                     UploadChangeset(clientVersion: 3, lastIntegratedServerVersion: 0, changeset: more)])
        _ = try await h.handleSecondMergedAhead(first, second)
        let stored = try await h.complexities(keys)
        #expect(keys.allSatisfy { stored[$0] == .int(11) }, "\(keys.map { stored[$0].map { "\($0)" } ?? "missing" })")
        #expect(h.premerges(ahead: true, used: false) == 1)
        #expect(await h.close() == 3)
    }
}
