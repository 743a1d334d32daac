import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Many in-memory synced databases in one process (issue 11, point 13): with about 200 open,
/// the sweep of stale /dev/shm files crashed the host.
@Suite("Many in-memory synced databases")
struct ManyInMemoryDatabasesTests {
    /// In a child process (an exit test): its 250 databases hold about 1,500 file descriptors,
    /// and with that many open, Foundation's own `Process.run` (which another test uses to
    /// start openssl) overreads a /proc/self/fd directory entry the same way our sweep did;
    /// AddressSanitizer reported it in a CI dry run.
    @Test func twoHundredFiftyOpenSyncAndCloseWithoutCrashing() async {
        await #expect(processExitsWith: .success) {
            do { try await Self.openTwoHundredFifty() } catch { Issue.record(error) }
        }
    }

    static func openTwoHundredFifty() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await SessionTestApp(url: url, subject: "many-in-memory")
            var o = SyncOpenOptions(initialSubscriptions: { $0.add(name: "mine", objectType: "Item", query: "ownerId == '\(a.user.id)'") })
            o.inMemory = true
            var sessions: [SyncSession] = []
            for i in 0..<250 { sessions.append(try a.open("many-\(i)", options: o)) }
            try sessions[249].createItem(owner: a.user.id, name: "from the last one")
            try await sessions[249].waitUpload()
            try await sessions[0].waitDownload()
            #expect(try sessions[0].itemNames() == ["from the last one"])
            for s in sessions { s.close() }
            a.app.close()
        }
    }

    /// A process that runs out of file descriptors with in-memory synced databases open: the
    /// open that finds none left fails with an error that says so, every database already open
    /// (unsynced and never read ones too) keeps working with not one descriptor left, since
    /// each took all it needs when it opened, and once some are closed the next open succeeds.
    /// In a child process (an exit test, whose issues reach this one; an error it throws would
    /// only show as a signal): its low RLIMIT_NOFILE would starve the other tests of this process.
    @Test func runningOutOfFileDescriptorsFailsTheOpenClearly() async {
        await #expect(processExitsWith: .success) {
            do { try await Self.openUntilDescriptorsRunOut() } catch { Issue.record(error) }
        }
    }

    static func openUntilDescriptorsRunOut() async throws {
        func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
        try await SyncTestServer.withServer { url in
            let a = try await SessionTestApp(url: url, subject: "fd-limit")
            var o = SyncOpenOptions()
            o.inMemory = true
            var sessions = [try a.open("fd-first", options: o)]
            // Unsynced ones too, in memory and on disk, opened but never read.
            let plain = try [DatabaseConfiguration.Location.memory("fd-plain"), .file(a.directory + "/plain.ferry")].map {
                try Database.open(DatabaseConfiguration(location: $0, schema: itemSchema), scheduler: PollingScheduler())
            }
            let baseline = openDescriptors()
            var limit = rlimit()
            try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
            limit.rlim_cur = rlim_t(baseline + 200)
            try #require(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
            var failure: FerryError?
            while failure == nil && sessions.count < 1_000 {
                do { sessions.append(try a.open("fd-\(sessions.count)", options: o)) } catch let e as FerryError { failure = e }
            }
            let e = try #require(failure, "1,000 databases opened with \(limit.rlim_cur) file descriptors")
            #expect(sessions.count >= 10, "only \(sessions.count) databases opened with 200 file descriptors to spare")
            #expect(e.code == .io && e.message.contains("ran out of file descriptors") && e.message.contains("RLIMIT_NOFILE"), "\(e)")
            // Not one descriptor left (the failed open gave back what it took): the open
            // databases still read and write, and close.
            var fillers: [Int32] = []
            while case let fd = open("/dev/null", O_RDONLY), fd >= 0 { fillers.append(fd) }
            #expect(errno == EMFILE)
            do {
                defer { for fd in fillers { close(fd) } }
                for (i, s) in sessions.enumerated() {
                    try s.createItem(owner: a.user.id, name: "item \(i)")
                    #expect(try s.itemNames() == ["item \(i)"])
                }
                for db in plain {
                    #expect(try db.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).isEmpty)
                    db.close()
                }
                for s in sessions.suffix(5) { s.close() }
                sessions.removeLast(5)
            }
            sessions.append(try a.open("fd-after", options: o))
            for s in sessions { s.close() }
            #expect(openDescriptors() <= baseline, "file descriptors left open by the closed databases")
            a.app.close()
        }
    }
}
