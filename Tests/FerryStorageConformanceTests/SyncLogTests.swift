import FerryAuth
import FerrySyncStorage
import Foundation
import Testing

/// The operations data through `OperationsStorage`: the per-user sync log (order, filters,
/// paging, retention by count and age) and the connections nodes publish, which every node of
/// a cluster reads alike.
@Suite("Storage: sync log and live connections")
struct SyncLogTests {
    static let t0: Int64 = 1_800_000_000_000

    static func entry(_ user: String, _ kind: SyncLogKind, at offset: Int64, _ message: String = "m") -> SyncLogEntry {
        SyncLogEntry(timeMilliseconds: t0 + offset, kind: kind, userId: user, node: "n1", connectionId: 7, message: message,
                     details: #"{"object_type":"Item","note":"\u00e9\"x"}"#)
    }

    @Test(arguments: Backend.all)
    func entriesComeBackNewestFirstWithEveryField(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let log = store.operations
            try await log.appendSyncLog([Self.entry("ann", .connectionOpened, at: 0, "first"), Self.entry("bob", .upload, at: 1)])
            try await log.appendSyncLog([Self.entry("ann", .upload, at: 2, "second")])
            let ann = try await log.syncLog(SyncLogQuery(userId: "ann"))
            #expect(ann.map(\.message) == ["second", "first"])
            #expect(ann[0].id > ann[1].id)
            let first = try #require(ann.last)
            #expect(first.kind == .connectionOpened && first.userId == "ann" && first.node == "n1" && first.connectionId == 7)
            #expect(first.timeMilliseconds == Self.t0)
            #expect(first.details == #"{"object_type":"Item","note":"\u00e9\"x"}"#)
            #expect(try await log.syncLog(SyncLogQuery()).count == 3)
        }
    }

    @Test(arguments: Backend.all)
    func filtersByKindTimeAndPages(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let log = store.operations
            let kinds: [SyncLogKind] = [.upload, .compensatingWrite, .upload, .sessionBound, .upload, .compensatingWrite]
            try await log.appendSyncLog(kinds.enumerated().map { Self.entry("ann", $0.element, at: Int64($0.offset) * 1000, "\($0.offset)") })
            try await log.appendSyncLog([Self.entry("bob", .upload, at: 500)])

            let uploads = try await log.syncLog(SyncLogQuery(userId: "ann", kinds: [.upload]))
            #expect(uploads.map(\.message) == ["4", "2", "0"])
            let two = try await log.syncLog(SyncLogQuery(userId: "ann", kinds: [.upload, .sessionBound]))
            #expect(two.map(\.message) == ["4", "3", "2", "0"])
            // since is inclusive, until exclusive.
            let window = try await log.syncLog(SyncLogQuery(userId: "ann", sinceMilliseconds: Self.t0 + 1000, untilMilliseconds: Self.t0 + 4000))
            #expect(window.map(\.message) == ["3", "2", "1"])
            // Pages of two, each after the last id of the one before.
            var pages: [[String]] = []
            var before: Int64?
            repeat {
                let page = try await log.syncLog(SyncLogQuery(userId: "ann", beforeId: before, limit: 2))
                pages.append(page.map(\.message))
                before = page.count == 2 ? page.last?.id : nil
            } while before != nil
            #expect(pages == [["5", "4"], ["3", "2"], ["1", "0"], []])
            // Across users (the rejected writes).
            let rejected = try await log.syncLog(SyncLogQuery(kinds: [.compensatingWrite]))
            #expect(rejected.map(\.message) == ["5", "1"])
            #expect(try await log.syncLog(SyncLogQuery(kinds: [.upload])).map(\.userId) == ["bob", "ann", "ann", "ann"])
        }
    }

    @Test(arguments: Backend.all)
    func retentionKeepsTheNewestPerUserAndDropsOldEntries(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let log = store.operations
            let day: Int64 = 86_400_000
            try await log.appendSyncLog((0..<10).map { Self.entry("ann", .upload, at: Int64($0), "a\($0)") })
            try await log.appendSyncLog((0..<3).map { Self.entry("bob", .upload, at: Int64($0), "b\($0)") })
            try await log.appendSyncLog([Self.entry("old", .upload, at: -40 * day, "too old"), Self.entry("old", .upload, at: -1 * day, "recent")])
            let retention = SyncLogRetention(maxEntriesPerUser: 4, maxAgeDays: 30)
            // Only the users named are trimmed by count; age applies to all.
            let removed = try await log.trimSyncLog(retention, users: ["ann"], nowMilliseconds: Self.t0)
            #expect(removed == 7)
            #expect(try await log.syncLog(SyncLogQuery(userId: "ann")).map(\.message) == ["a9", "a8", "a7", "a6"])
            #expect(try await log.syncLog(SyncLogQuery(userId: "bob")).count == 3)
            #expect(try await log.syncLog(SyncLogQuery(userId: "old")).map(\.message) == ["recent"])
            // Every user.
            try await log.trimSyncLog(SyncLogRetention(maxEntriesPerUser: 2, maxAgeDays: 30), users: nil, nowMilliseconds: Self.t0)
            #expect(try await log.syncLog(SyncLogQuery(userId: "bob")).map(\.message) == ["b2", "b1"])
            #expect(try await log.syncLog(SyncLogQuery(userId: "ann")).map(\.message) == ["a9", "a8"])
        }
    }

    @Test(arguments: Backend.all)
    func theLogSurvivesAReopen(_ backend: Backend) async throws {
        try await backend.withPlace { place in
            try await place.withOpen { try await $0.operations.appendSyncLog([Self.entry("ann", .error, at: 0, "kept")]) }
            try await place.withOpen { store throws in
                #expect(try await store.operations.syncLog(SyncLogQuery(userId: "ann")).map(\.message) == ["kept"])
            }
        }
    }

    @Test(arguments: Backend.all)
    func nodesPublishTheirConnectionsAndStalePublicationsGo(_ backend: Backend) async throws {
        try await backend.withStore { store throws in
            let ops = store.operations
            let a = LiveConnectionRecord(node: "a", connectionId: 1, userId: "ann", clientFile: 12, sdk: "ferry/0.1.0 linux-x86_64",
                                         connectedSinceMilliseconds: Self.t0, bytesUp: 100, bytesDown: 2000, sessions: 2)
            let b = LiveConnectionRecord(node: "b", connectionId: 1, userId: "bob", connectedSinceMilliseconds: Self.t0 + 1)
            try await ops.publishConnections(node: "a", [a], nowMilliseconds: Self.t0 + 10_000)
            try await ops.publishConnections(node: "b", [b], nowMilliseconds: Self.t0 + 1_000)
            #expect(try await ops.liveConnections(freshSinceMilliseconds: Self.t0) == [a, b])
            // A new publication replaces the node's previous one.
            var a2 = a
            a2.bytesUp = 500
            try await ops.publishConnections(node: "a", [a2], nowMilliseconds: Self.t0 + 11_000)
            #expect(try await ops.liveConnections(freshSinceMilliseconds: Self.t0) == [a2, b])
            // Node b stopped publishing: gone.
            #expect(try await ops.liveConnections(freshSinceMilliseconds: Self.t0 + 5_000) == [a2])
            try await ops.publishConnections(node: "a", [], nowMilliseconds: Self.t0 + 12_000)
            #expect(try await ops.liveConnections(freshSinceMilliseconds: Self.t0) == [])
        }
    }
}
