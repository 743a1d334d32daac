import FerryAppConfig
import FerryCore
import FerrySQLiteStorage
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// A bootstrap is streamed (`ViewEvaluation`): read from a snapshot in pages and sent as it is
/// read, with only a few messages queued for a client that reads slowly, and its progress
/// figures exact: each DOWNLOAD says how many bytes of the batch are still to come.
@Suite("Server: streamed bootstraps")
struct StreamedBootstrapTests {
    let app = try! AppDirectory.load(AuthAPITests.example)
    let alice = UserContext(id: "alice")

    static func key(_ n: Int) -> FerryValue {
        .objectId(try! ObjectId(bytes: [UInt8](repeating: 0, count: 8) + withUnsafeBytes(of: UInt32(n).bigEndian) { Array($0) }))
    }

    /// Writes `count` of alice's Items keyed `key(0..<count)`, each name about `nameBytes`
    /// long and different at its start (front coding would shrink equal ones to nothing).
    static func writeItems(_ count: Int, nameBytes: Int, of item: ObjectSchema, to storage: SQLiteSyncStorage) async throws {
        let file = try await storage.newClientFile(userId: "alice")
        let filler = String(repeating: "x", count: nameBytes)
        try await storage.writeTransaction { tx in
            var objects: [ObjectKey: StoredObject] = [:]
            for n in 0..<count {
                let key = Self.key(n)
                let fields = [FieldValue(name: "ownerId", value: .string("alice")), FieldValue(name: "itemName", value: .string("\(n)-\(filler)")),
                              FieldValue(name: "complexity", value: .int(Int64(n % 10)))]
                objects[ObjectKey(table: "Item", key: key)] = StoredObject(object: StampedObject(schema: item, key: key, fields: fields,
                                                                                                  stamp: Stamp(timestamp: 1, fileIdent: 1), version: 1))
            }
            _ = try await tx.write(objects: objects, clientFile: file.ident, clientVersion: 0)
        }
    }

    @Test func aLargeBootstrapIsSentWhileReadWithFewMessagesQueuedAndExactProgress() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("streamed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let storage = try SQLiteSyncStorage(path: dir.appendingPathComponent("sync.sqlite").path)
        let schema = try app.schema
        let item = try #require(schema.objectSchema(named: "Item"))
        // About 4 MB of Items (16 messages of 256 KB): far more than the stream keeps queued.
        let count = 4_000
        try await Self.writeItems(count, nameBytes: 1_000, of: item, to: storage)
        var written: Set<FerryValue> = []
        for n in 0..<count { written.insert(Self.key(n)) }

        let outbox = ConnectionOutbox(id: 1, user: alice)
        let evaluation = ViewEvaluation(session: 1, subscriptions: [Subscription(name: "all", objectType: "Item", query: "TRUEPREDICATE")],
                                        setVersion: 1, user: alice, app: app, schema: schema, limits: SyncLimits(), oldView: .empty(user: alice),
                                        since: 0, setChanged: true, outbox: outbox)
        let installed = LockedValue<UInt64?>(nil)
        let run = Task {
            try await evaluation.run(storage: storage) { _, version in
                installed.withLock { $0 = version }
                return 0
            }
        }
        // The client reads one message at a time; the queue never holds the whole bootstrap.
        var mostQueued = 0
        var received: Set<FerryValue> = []
        var remainingSeen: [UInt64] = []
        var sizes: [Int] = []
        var last = false
        while !last {
            mostQueued = max(mostQueued, outbox.queuedBytes)
            guard let frame = await outbox.next() else { break }
            guard case let .download(_, serverVersion, _, subscriptionVersion, downloadable, isLast, changesets) = try ProtocolCodec.decode(frame) else {
                Issue.record("not a DOWNLOAD")
                break
            }
            #expect(serverVersion == 1)
            #expect(subscriptionVersion == 1)
            for c in changesets {
                sizes.append(c.changeset.count)
                for i in try ChangesetCodec.decode(c.changeset).instructions { received.insert(i.key) }
            }
            remainingSeen.append(downloadable)
            last = isLast
        }
        guard case .sent(_, let version) = try await run.value else {
            Issue.record("the evaluation did not send its bootstrap")
            return
        }
        #expect(version == 1)
        #expect(installed.withLock { $0 } == 1)
        #expect(received == written)
        #expect(sizes.count >= 10)
        // Exact progress: each message says how many bytes of the batch come after it.
        for n in sizes.indices { #expect(remainingSeen[n] == UInt64(sizes[(n + 1)...].reduce(0, +))) }
        #expect(remainingSeen.last == 0)
        // At most the stream's queue and one message more were waiting at any time.
        #expect(mostQueued <= ViewEvaluation.streamQueueBytes + 2 * SyncHub.downloadChunkBytes)
        #expect(mostQueued < sizes.reduce(0, +) / 2)
        await storage.close()
    }
}
