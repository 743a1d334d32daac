import FerryAppConfig
import FerryCore
import FerrySQLiteStorage
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// A bootstrap's messages are encoded once (issue 23): the first pass spools them, in memory
/// up to one message and in an unlinked temporary file beyond, and the second pass sends
/// them back unchanged, in order; a spool that cannot write falls back to encoding again.
@Suite("Server: bootstrap spool")
struct BootstrapSpoolTests {
    static func chunk(_ n: Int, size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n) } }

    static func readBack(_ spool: BootstrapSpool) async throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        try await spool.forEach { out.append($0) }
        return out
    }

    @Test func oneMessageStaysInMemory() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)").path
        // A directory that does not exist: the spool never needs it for one message.
        let spool = BootstrapSpool(directory: dir)
        let c = Self.chunk(1, size: BootstrapSpool.memoryBytes)
        spool.append(c)
        #expect(spool.isUsable)
        #expect(spool.sizes == [c.count])
        #expect(try await Self.readBack(spool) == [c])
    }

    @Test func manyMessagesGoToAnUnlinkedFileAndComeBackInOrder() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let spool = BootstrapSpool(directory: dir.path)
        let chunks = (0..<12).map { Self.chunk($0, size: 100_000 + $0 * 7_919) }
        for c in chunks { spool.append(c) }
        #expect(spool.isUsable)
        #expect(spool.sizes == chunks.map(\.count))
        // Unlinked as soon as it was made: nothing left in the directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
        #expect(try await Self.readBack(spool) == chunks)
        // It can be read again (the second pass reads it once; nothing is consumed).
        #expect(try await Self.readBack(spool) == chunks)
    }

    @Test func aSpoolThatCannotWriteSaysSoAndKeepsCounting() async throws {
        let spool = BootstrapSpool(directory: "/nonexistent-\(UUID().uuidString)")
        let chunks = (0..<3).map { Self.chunk($0, size: BootstrapSpool.memoryBytes) }
        for c in chunks { spool.append(c) }
        #expect(!spool.isUsable)
        #expect(spool.failure?.contains("cannot make a spool file") == true)
        #expect(spool.sizes == chunks.map(\.count))
        await #expect(throws: FerryError.self) { try await Self.readBack(spool) }
    }

    /// The evaluation with a spool that fails sends the same bootstrap, encoded again.
    @Test(.timeLimit(.minutes(2))) func aBootstrapWhoseSpoolFailsIsStillSentWhole() async throws {
        let app = try AppDirectory.load(AuthAPITests.example)
        let alice = UserContext(id: "alice")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("spool-eval-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let storage = try SQLiteSyncStorage(path: dir.appendingPathComponent("sync.sqlite").path)
        let schema = try app.schema
        let item = try #require(schema.objectSchema(named: "Item"))
        let count = 1_500
        try await StreamedBootstrapTests.writeItems(count, nameBytes: 600, of: item, to: storage)
        for spoolDirectory in [dir.path, "/nonexistent-\(UUID().uuidString)"] {
            let outbox = ConnectionOutbox(id: 1, user: alice)
            var evaluation = ViewEvaluation(session: 1, subscriptions: [Subscription(name: "all", objectType: "Item", query: "TRUEPREDICATE")],
                                            setVersion: 1, user: alice, app: app, schema: schema, limits: SyncLimits(), oldView: .empty(user: alice),
                                            since: 0, setChanged: true, outbox: outbox)
            evaluation.spoolDirectory = spoolDirectory
            let run = Task { try await evaluation.run(storage: storage) { _, _ in 0 } }
            var received: Set<FerryValue> = []
            var messages = 0
            var last = false
            while !last {
                guard let frame = await outbox.next() else { break }
                guard case let .download(_, _, _, _, remaining, isLast, changesets) = try ProtocolCodec.decode(frame) else {
                    Issue.record("not a DOWNLOAD")
                    break
                }
                messages += 1
                for c in changesets { for i in try ChangesetCodec.decode(c.changeset).instructions { received.insert(i.key) } }
                if isLast { #expect(remaining == 0) }
                last = isLast
            }
            guard case .sent = try await run.value else {
                Issue.record("the evaluation did not send its bootstrap (\(spoolDirectory))")
                return
            }
            #expect(messages > 1, "the bootstrap spans several messages (\(spoolDirectory))")
            #expect(received.count == count, "every object arrived (\(spoolDirectory))")
        }
        await storage.close()
    }
}
