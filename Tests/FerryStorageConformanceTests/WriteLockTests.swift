import FerryCore
import FerrySyncStorage
import Testing

/// Write transactions hold the app's write lock: concurrent ones take turns, so versions are
/// handed out without gaps or repeats, and what a transaction read is still true when it
/// writes (merges read the current state and write the result).
@Suite("Storage: the write lock")
struct WriteLockTests {
    static let tasks = 8, perTask = 25

    @Test(arguments: Backend.all)
    func concurrentTransactionsGetGapFreeUniqueVersions(_ backend: Backend) async throws {
        let tasks = Self.tasks, perTask = Self.perTask
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            let results = try await withThrowingTaskGroup(of: [(seen: UInt64, written: UInt64)].self) { group in
                for t in 0..<tasks {
                    group.addTask {
                        var mine: [(seen: UInt64, written: UInt64)] = []
                        for i in 0..<perTask {
                            let id = "t\(t)-\(i)"
                            mine.append(try await s.writeTransaction { tx in
                                (tx.headVersion, try await tx.write(objects: [Fixtures.noteKey(id): StoredObject(object: Fixtures.note(id, id))],
                                                                    clientFile: file.ident, clientVersion: UInt64(i + 1)))
                            })
                        }
                        return mine
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let total = UInt64(tasks * perTask)
            #expect(results.map(\.written).sorted() == Array(1...total))
            #expect(results.allSatisfy { $0.written == $0.seen + 1 })
            #expect(try await s.head() == total)
            let changes = try await s.allChanges(since: 0, Fixtures.note)
            #expect(changes.map(\.version) == Array(1...total))
            #expect(try await s.clientFile(file.ident)?.acknowledgedClientVersion == UInt64(perTask))
        }
    }

    @Test(arguments: Backend.all)
    func concurrentReadModifyWritesLoseNothing(_ backend: Backend) async throws {
        let counter = Fixtures.noteKey("counter")
        try await backend.withStore { store in
            let s = store.storage
            let file = try await s.newClientFile(userId: "u1")
            try await s.commit([counter: StoredObject(object: Fixtures.note("counter", "0"))], clientFile: file.ident)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<Self.tasks {
                    group.addTask {
                        for _ in 0..<10 {
                            _ = try await s.writeTransaction { tx in
                                let current = try await tx.objects([counter], schema: Fixtures.schema)[counter]
                                guard case .string(let text)? = current?.object?.values[1], let n = Int(text) else { throw Deliberate() }
                                return try await tx.write(objects: [counter: StoredObject(object: Fixtures.note("counter", "\(n + 1)"))],
                                                          clientFile: file.ident, clientVersion: 0)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let final = try await s.object(counter, schema: Fixtures.note)
            #expect(final?.object?.values[1] == .string("\(Self.tasks * 10)"))
            #expect(try await s.head() == UInt64(Self.tasks * 10 + 1))
        }
    }
}
