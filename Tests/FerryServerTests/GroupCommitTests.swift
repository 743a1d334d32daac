import FerryTestSupport
import FerryCore
import FerrySQLiteStorage
import FerrySyncStorage
import Foundation
import Testing
@testable import FerryServer

/// Group commit (`GroupCommit`): uploads queued while a transaction runs share the next one,
/// each at its own version, answered only after that commit; one upload's own failure does
/// not fail the others, a store failure fails all of them.
@Suite("Server: group commit")
struct GroupCommitTests {
    /// A fresh SQLite store in a temporary directory, with one client file.
    func withStore(_ body: (SQLiteSyncStorage, UInt64) async throws -> Void) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("group-commit-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let storage = try SQLiteSyncStorage(path: dir.appendingPathComponent("sync.sqlite").path)
        let file = try await storage.newClientFile(userId: "u")
        try await body(storage, file.ident)
        await storage.close()
    }

    func object(_ n: Int64, version: UInt64) -> (ObjectKey, StoredObject) {
        let values: [FerryValue] = [.int(n), .int(n)]
        let stamps = [Stamp(timestamp: n, fileIdent: 1), Stamp(timestamp: n, fileIdent: 1)]
        return (ObjectKey(table: "Item", key: .int(n)), StoredObject(object: StampedObject(values: values, stamps: stamps, versions: [version, version])))
    }

    /// Waits (polling, at most `seconds`) until `condition` holds.
    func eventually(_ seconds: Double = 10, _ condition: () -> Bool) async throws {
        guard await poll(seconds: seconds, every: .milliseconds(2), condition) else { throw TimedOut(what: "a group-commit condition") }
    }

    @Test func uploadsQueuedDuringACommitShareTheNextTransactionEachAtItsOwnVersion() async throws {
        try await withStore { storage, file in
            let fanned = LockedValue<[[UInt64]]>([])
            let commits = GroupCommit<UInt64>(storage: storage) { group in fanned.withLock { $0.append(group) } }
            let gate = AsyncStream<Void>.makeStream()
            // The first upload holds its transaction open until the others are queued.
            let first = Task {
                try await commits.commit { tx in
                    for await _ in gate.stream { break }
                    let (k, o) = object(0, version: tx.headVersion + 1)
                    return try await tx.write(objects: [k: o], clientFile: file, clientVersion: 1)
                }
            }
            try await eventually { commits.queuedCount == 0 && commits.running }
            let others = (1...20).map { n in
                Task {
                    try await commits.commit { tx in
                        let (k, o) = object(Int64(n), version: tx.headVersion + 1)
                        return try await tx.write(objects: [k: o], clientFile: file, clientVersion: UInt64(n + 1))
                    }
                }
            }
            try await eventually { commits.queuedCount == 20 }
            gate.continuation.yield()
            #expect(try await first.value == 1)
            var versions: [UInt64] = []
            for t in others { versions.append(try await t.value) }
            // Every upload has its own version, with no gap; two transactions in all.
            #expect(versions.sorted() == Array(2...21))
            #expect(commits.committed.groups == 2)
            #expect(commits.committed.jobs == 21)
            #expect(fanned.withLock { $0 }.map { $0.sorted() } == [[1], Array(2...21)])
            #expect(try await storage.syncState().headVersion == 21)
            #expect(try await storage.clientFile(file)?.acknowledgedClientVersion == 21)
        }
    }

    @Test func oneUploadsOwnFailureLeavesTheOthersCommitted() async throws {
        try await withStore { storage, file in
            let commits = GroupCommit<UInt64>(storage: storage)
            let gate = AsyncStream<Void>.makeStream()
            let first = Task {
                try await commits.commit { tx in
                    for await _ in gate.stream { break }
                    let (k, o) = object(0, version: tx.headVersion + 1)
                    return try await tx.write(objects: [k: o], clientFile: file, clientVersion: 1)
                }
            }
            try await eventually { commits.running }
            let bad = Task {
                try await commits.commit { _ -> UInt64 in throw SessionFailure(1, ProtocolError.Code.badChangeset, "malformed", .protocolViolation) }
            }
            try await eventually { commits.queuedCount == 1 }
            let good = Task {
                try await commits.commit { tx in
                    let (k, o) = object(1, version: tx.headVersion + 1)
                    return try await tx.write(objects: [k: o], clientFile: file, clientVersion: 2)
                }
            }
            try await eventually { commits.queuedCount == 2 }
            gate.continuation.yield()
            #expect(try await first.value == 1)
            await #expect(throws: SessionFailure.self) { try await bad.value }
            #expect(try await good.value == 2)
            #expect(try await storage.syncState().headVersion == 2)
        }
    }

    @Test func aStoreFailureFailsTheWholeGroupAndLeavesNothing() async throws {
        try await withStore { storage, file in
            let commits = GroupCommit<UInt64>(storage: storage)
            let gate = AsyncStream<Void>.makeStream()
            let first = Task {
                try await commits.commit { tx in
                    for await _ in gate.stream { break }
                    return tx.headVersion
                }
            }
            try await eventually { commits.running }
            let writes = (1...3).map { n in
                Task {
                    try await commits.commit { tx in
                        let (k, o) = object(Int64(n), version: tx.headVersion + 1)
                        return try await tx.write(objects: [k: o], clientFile: file, clientVersion: UInt64(n))
                    }
                }
            }
            let broken = Task {
                try await commits.commit { _ -> UInt64 in throw FerryError(.io, "the disk is gone") }
            }
            try await eventually { commits.queuedCount == 4 }
            gate.continuation.yield()
            #expect(try await first.value == 0)
            for t in writes { await #expect(throws: FerryError.self) { try await t.value } }
            await #expect(throws: FerryError.self) { try await broken.value }
            #expect(try await storage.syncState().headVersion == 0)
            #expect(try await storage.clientFile(file)?.acknowledgedClientVersion == 0)
        }
    }
}
