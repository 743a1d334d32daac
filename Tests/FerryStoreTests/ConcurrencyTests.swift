import Testing
import FerryCore
@testable import FerryStore
@testable import FerryClient
#if canImport(Glibc)
import Glibc
#endif

/// Several threads writing through their own handles, reading, observing and closing, all at
/// once on one file. Run it under ThreadSanitizer (`swift test --sanitize=thread`) to check the
/// locking; here it checks that nothing is lost, nothing deadlocks, and every commit is in the
/// history.
@Suite("Concurrency")
struct ConcurrencyTests {
    @Test func writersReadersAndObserversTogether() throws {
        let dir = Fixtures.temporaryDirectory()
        defer { Fixtures.removeTree(dir) }
        let path = dir + "/c.ferry"
        let seed = try Database.open(DatabaseConfiguration(location: .file(path), schema: Fixtures.itemSchema()), scheduler: try LoopScheduler())
        let seen = Collector()
        let token = try seed.observeQuery(classIndex: 0, query: "complexity >= 0", arguments: [], callback: seen.add)

        let writers = 4, perWriter = 50
        let failures = Collector()
        var threads: [pthread_t] = []
        final class Job: @unchecked Sendable {
            let body: () -> Void
            init(_ body: @escaping () -> Void) { self.body = body }
        }
        func spawn(_ body: @escaping () -> Void) {
            var t = pthread_t()
            let job = Unmanaged.passRetained(Job(body)).toOpaque()
            pthread_create(&t, nil, { arg in
                guard let arg else { return nil }
                Unmanaged<Job>.fromOpaque(arg).takeRetainedValue().body()
                return nil
            }, job)
            threads.append(t)
        }
        for w in 0..<writers {
            spawn {
                do {
                    let db = try Database.open(DatabaseConfiguration(location: .file(path), schema: nil), scheduler: try PollingScheduler())
                    defer { db.close() }
                    for n in 0..<perWriter {
                        try db.beginWrite()
                        try Fixtures.createItem(db, UInt32(w * 1000 + n), complexity: Int64(n))
                        try db.commit()
                        _ = try db.query(classIndex: 0, query: "complexity < 10", arguments: [])
                    }
                } catch {
                    failures.add(ChangeSummary())
                }
            }
        }
        spawn {
            // A reader that opens and closes handles while the others write.
            for _ in 0..<20 {
                guard let db = try? Database.open(DatabaseConfiguration(location: .file(path), schema: nil), scheduler: try! PollingScheduler()) else {
                    failures.add(ChangeSummary()); return
                }
                _ = try? db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: [])
                db.close()
            }
        }
        for t in threads { pthread_join(t, nil) }
        #expect(failures.all.isEmpty)
        #expect(try seed.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count == writers * perWriter)
        #expect(try seed.historyCount() == UInt64(writers * perWriter))
        try seed.verifyHistory()
        // Every insert is reported once, however deliveries coalesced.
        var inserted = 0
        for _ in 0..<400 where inserted < writers * perWriter {
            inserted = seen.all.reduce(0) { $0 + $1.inserted.count }
            if inserted < writers * perWriter { _ = seen.wait(for: seen.all.count + 1, seconds: 0.05) }
        }
        #expect(inserted == writers * perWriter)
        token.cancel()
        seed.close()
        seed.scheduler.shutdown()
    }
}
