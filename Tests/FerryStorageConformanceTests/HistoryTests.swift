import FerryCore
import FerrySyncStorage
import Testing

/// The app's history: each write transaction that writes objects commits the next version,
/// versions have no gaps and are never handed out twice, and a failed transaction leaves no
/// trace. Devices catch up by version, so a gap or a repeat loses or replays changes.
@Suite("Storage: history and versions")
struct HistoryTests {
    @Test(arguments: Backend.all)
    func transactionsCommitTheNextVersionAndChangesComeInVersionOrder(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            #expect(try await s.head() == 0)
            for (i, n) in ([1, 2, 3, 1] as [UInt8]).enumerated() {
                let version = UInt64(i + 1)
                let object = StoredObject(object: Fixtures.item(n, version: version))
                let (seen, written) = try await s.writeTransaction { tx in
                    (tx.headVersion, try await tx.write(objects: [Fixtures.itemKey(n): object], clientFile: file.ident, clientVersion: version))
                }
                #expect(seen == version - 1)
                #expect(written == version)
                #expect(try await s.head() == version)
            }
            // Each object once, at its last version, in version order; only after `since`.
            #expect(try await s.allChanges(since: 0, Fixtures.item).map(\.version) == [2, 3, 4])
            #expect(try await s.allChanges(since: 0, Fixtures.item).map(\.key) == [Fixtures.itemKey(2).key, Fixtures.itemKey(3).key, Fixtures.itemKey(1).key])
            #expect(try await s.allChanges(since: 2, Fixtures.item).map(\.version) == [3, 4])
            #expect(try await s.allChanges(since: 4, Fixtures.item).isEmpty)
            #expect(try await s.allChanges(since: 99, Fixtures.item).isEmpty)
            #expect(try await s.allChanges(since: 0, Fixtures.note).isEmpty)
        }
    }

    /// Group commit: several uploads in one transaction, each at its own version, each
    /// reading what the one before wrote; all durable with the one commit, or none.
    @Test(arguments: Backend.all)
    func severalWritesInOneTransactionGetConsecutiveVersions(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let a = try await s.newClientFile(userId: "u1"), b = try await s.newClientFile(userId: "u2")
            let seen = try await s.writeTransaction { tx -> [UInt64] in
                // Read ahead (a group's uploads): later reads see the writes, not what was read.
                try await tx.prefetch(clientFiles: [a.ident, b.ident], keys: [Fixtures.itemKey(1), Fixtures.itemKey(9)], schema: Fixtures.schema)
                #expect(try await tx.objects([Fixtures.itemKey(1)], schema: Fixtures.schema).isEmpty)
                var heads = [tx.headVersion]
                heads.append(try await tx.write(objects: [Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, version: 1))], clientFile: a.ident, clientVersion: 3))
                // The second write reads the first one's object.
                let read = try await tx.objects([Fixtures.itemKey(1)], schema: Fixtures.schema)
                heads.append(read[Fixtures.itemKey(1)]?.object == Fixtures.item(1, version: 1) ? 1 : 0)
                heads.append(try await tx.write(objects: [Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, complexity: 7, version: 2))],
                                                clientFile: b.ident, clientVersion: 5))
                heads.append(try await tx.write(objects: [:], clientFile: a.ident, clientVersion: 4))
                heads.append(tx.headVersion)
                #expect(try await tx.clientFile(a.ident)?.acknowledgedClientVersion == 4)
                #expect(try await tx.clientFile(b.ident)?.acknowledgedClientVersion == 5)
                #expect(try await tx.objects([Fixtures.itemKey(1)], schema: Fixtures.schema)[Fixtures.itemKey(1)]?.object == Fixtures.item(1, complexity: 7, version: 2))
                return heads
            }
            #expect(seen == [0, 1, 1, 2, 2, 2])
            #expect(try await s.head() == 2)
            #expect(try await s.allChanges(since: 0, Fixtures.item) == [Change(key: Fixtures.itemKey(1).key, object: Fixtures.item(1, complexity: 7, version: 2), version: 2)])
            // Each change names the client file whose write made it (the second write), also
            // as a snapshot reads it: the Data API's feed says who made a change from it.
            var authors: [UInt64?] = []
            try await s.changes(since: 0, schema: Fixtures.item) { authors.append($0.author) }
            #expect(authors == [b.ident])
            let seenBySnapshot = try await s.withSnapshot { snap in
                var out: [UInt64?] = []
                try await snap.changes(since: 0, schema: Fixtures.item) { out.append($0.author) }
                return out
            }
            #expect(seenBySnapshot == [b.ident])
            #expect(try await s.clientFile(a.ident)?.acknowledgedClientVersion == 4)
            #expect(try await s.clientFile(b.ident)?.acknowledgedClientVersion == 5)
            // A transaction that fails after two writes leaves neither.
            await #expect(throws: Deliberate.self) {
                try await s.writeTransaction { tx in
                    _ = try await tx.write(objects: [Fixtures.itemKey(2): StoredObject(object: Fixtures.item(2, version: 3))], clientFile: a.ident, clientVersion: 9)
                    _ = try await tx.write(objects: [Fixtures.itemKey(3): StoredObject(object: Fixtures.item(3, version: 4))], clientFile: a.ident, clientVersion: 10)
                    throw Deliberate()
                }
            }
            #expect(try await s.head() == 2)
            #expect(try await s.allChanges(since: 2, Fixtures.item).isEmpty)
            #expect(try await s.clientFile(a.ident)?.acknowledgedClientVersion == 4)
            #expect(try await s.commit([Fixtures.itemKey(2): StoredObject(object: Fixtures.item(2, version: 3))], clientFile: a.ident) == 3)
        }
    }

    @Test(arguments: Backend.all)
    func anEmptyWriteKeepsTheHeadButRecordsTheAcknowledgement(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "x"))], clientFile: file.ident, clientVersion: 1)
            let (seen, written) = try await s.writeTransaction { tx in
                (tx.headVersion, try await tx.write(objects: [:], clientFile: file.ident, clientVersion: 5))
            }
            #expect(seen == 1)
            #expect(written == 1)
            #expect(try await s.head() == 1)
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == 5)
            // A transaction that writes nothing at all also keeps the head.
            let untouched = try await s.writeTransaction { tx in tx.headVersion }
            #expect(untouched == 1)
            #expect(try await s.commit([Fixtures.noteKey("b"): StoredObject(object: Fixtures.note("b", "y"))], clientFile: file.ident) == 2)
        }
    }

    /// More objects than a backend reads in one page (PostgreSQL pages by 1,000), in one
    /// version and across versions: every change comes once, in version order.
    @Test(arguments: Backend.all)
    func longHistoriesAreReadInFull(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let ids = (0..<2_500).map { "n\(10_000 + $0)" }
            try await s.commit(Dictionary(uniqueKeysWithValues: ids.map { (Fixtures.noteKey($0), StoredObject(object: Fixtures.note($0, "v1"))) }),
                               clientFile: file.ident)
            let moved = ids.filter { $0.hasSuffix("1") || $0.hasSuffix("3") || $0.hasSuffix("7") || $0.hasSuffix("9") }  // 1,000
            var second = Dictionary(uniqueKeysWithValues: moved.map { (Fixtures.noteKey($0), StoredObject(object: Fixtures.note($0, "v2", version: 2))) })
            for id in ids.prefix(300) where second[Fixtures.noteKey(id)] == nil { second[Fixtures.noteKey(id)] = StoredObject(object: nil) }
            try await s.commit(second, clientFile: file.ident)
            let erased = second.values.filter { $0.object == nil }.count

            let all = try await s.allChanges(since: 0, Fixtures.note)
            #expect(all.count == ids.count)
            #expect(Set(all.map(\.key)).count == ids.count)
            #expect(all.map(\.version) == Array(repeating: 1, count: ids.count - second.count) + Array(repeating: 2, count: second.count))
            #expect(try await s.allChanges(since: 1, Fixtures.note).count == second.count)
            let live = try await s.withSnapshot { snap in try await snap.allObjects(Fixtures.note) }
            #expect(live.count == ids.count - erased)
            #expect(live[.string("n10001")] == Fixtures.note("n10001", "v2", version: 2))
            #expect(live[.string("n10002")] == nil)
        }
    }

    @Test(arguments: Backend.all)
    func aTransactionThatThrowsLeavesNothing(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let original = StoredObject(object: Fixtures.item(1))
            try await s.commit([Fixtures.itemKey(1): original], clientFile: file.ident, clientVersion: 1)

            // Throws after writing: the write is rolled back.
            await #expect(throws: Deliberate.self) {
                try await s.writeTransaction { tx -> UInt64 in
                    _ = try await tx.write(objects: [Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, complexity: 99, version: 2)),
                                                     Fixtures.itemKey(2): StoredObject(object: Fixtures.item(2, version: 2))],
                                           clientFile: file.ident, clientVersion: 9)
                    throw Deliberate()
                }
            }
            // Throws before writing.
            await #expect(throws: Deliberate.self) {
                try await s.writeTransaction { _ -> UInt64 in throw Deliberate() }
            }
            #expect(try await s.head() == 1)
            #expect(try await s.object(Fixtures.itemKey(1), schema: Fixtures.item) == original)
            #expect(try await s.object(Fixtures.itemKey(2), schema: Fixtures.item) == nil)
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == 1)
            #expect(try await s.allChanges(since: 1, Fixtures.item).isEmpty)
            // No version was consumed.
            let (seen, written) = try await s.writeTransaction { tx in
                (tx.headVersion, try await tx.write(objects: [Fixtures.itemKey(3): StoredObject(object: Fixtures.item(3, version: 2))],
                                                    clientFile: file.ident, clientVersion: 2))
            }
            #expect(seen == 1)
            #expect(written == 2)
        }
    }

    @Test(arguments: Backend.all)
    func theAcknowledgedClientVersionIsNeverLowered(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let other = try await s.newClientFile(userId: "u1")
            try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "1"))], clientFile: file.ident, clientVersion: 10)
            try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "2"))], clientFile: file.ident, clientVersion: 4)
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == 10)
            try await s.commit([:], clientFile: file.ident, clientVersion: 3)
            let seenInside = try await s.writeTransaction { tx in try await tx.clientFile(file.ident)?.acknowledgedClientVersion }
            #expect(seenInside == 10)
            try await s.commit([Fixtures.noteKey("a"): StoredObject(object: Fixtures.note("a", "3"))], clientFile: file.ident, clientVersion: 12)
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == 12)
            // Only the named client file is acknowledged.
            #expect(try await s.clientFile(other.ident)?.acknowledgedClientVersion == 0)
        }
    }

    /// Issue 23: a write told which keys have no row yet (`absent`; PostgreSQL inserts those
    /// without looking for a row) stores them like any other, beside keys that do have one,
    /// and a key written twice in one transaction (new, then changed) ends in its last state.
    @Test(arguments: Backend.all)
    func writesOfKeysKnownToBeAbsentStoreThemLikeAnyOther(_ backend: Backend) async throws {
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.writeTransaction { tx in
                _ = try await tx.write(objects: [Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, version: 1))], clientFile: file.ident, clientVersion: 1)
            }
            let keys = (2...5).map { Fixtures.itemKey(UInt8($0)) }
            try await s.writeTransaction { tx in
                var objects: [ObjectKey: StoredObject] = [Fixtures.itemKey(1): StoredObject(object: Fixtures.item(1, complexity: 9, version: 2))]
                for (i, k) in keys.enumerated() { objects[k] = StoredObject(object: Fixtures.item(UInt8(i + 2), version: 2)) }
                _ = try await tx.write(objects: objects, absent: Set(keys), clientFile: file.ident, clientVersion: 2)
                #expect(try await tx.objects([keys[0]], schema: Fixtures.schema)[keys[0]]?.object == Fixtures.item(2, version: 2))
                // The same new key again, in the same transaction: not absent any more.
                _ = try await tx.write(objects: [keys[0]: StoredObject(object: Fixtures.item(2, complexity: 8, version: 3))], clientFile: file.ident, clientVersion: 3)
            }
            let all = try await s.withSnapshot { try await $0.allObjects(Fixtures.item) }
            #expect(all.count == 5)
            #expect(all[Fixtures.itemKey(1).key] == Fixtures.item(1, complexity: 9, version: 2))
            #expect(all[keys[0].key] == Fixtures.item(2, complexity: 8, version: 3))
            for (i, k) in keys.enumerated().dropFirst() { #expect(all[k.key] == Fixtures.item(UInt8(i + 2), version: 2)) }
            #expect(try await s.allChanges(since: 2, Fixtures.item).map(\.key) == [keys[0].key])
        }
    }
}
