@testable import FerryClient
import FerryCore
@testable import FerryStore
import Foundation
import Testing

/// A client reset's fresh download is staged in the file as it arrives (issue 13, point 5),
/// against a real in-process server whose downloads come in messages of about 256 KB: the
/// device's data does not change until the last message, the staged rows are gone after it,
/// at most one message's instructions are held at once, and a run cut off mid-download (or
/// one that finds rows an earlier run left) starts from scratch.
@Suite("Client reset: the fresh download staged on disk")
struct ClientResetStagingSyncTests {
    /// What the session's staging probe saw after each staged message (loop thread).
    final class Staging: @unchecked Sendable {
        struct Step: Sendable, Equatable {
            /// The client file identity the run bound (one per run).
            var run: UInt64
            /// The changesets the run has staged, by the session's count and in the file.
            var staged: Int, rows: Int
            /// The Items the host could see meanwhile.
            var items: Int
        }
        private let lock = ThreadLock()
        private var steps: [Step] = []
        private var cut = false
        private var rowsAfterCut: [Int] = []

        func add(_ step: Step) { lock.withLock { steps.append(step) } }
        var all: [Step] { lock.withLock { steps } }
        /// True the first time only: the probe cuts the connection once.
        func cutOnce() -> Bool { lock.withLock { defer { cut = true }; return !cut } }
        var wasCut: Bool { lock.withLock { cut } }
        func disconnected(rows: Int) { lock.withLock { rowsAfterCut.append(rows) } }
        var stagedRowsAtDisconnects: [Int] { lock.withLock { rowsAfterCut } }
    }

    /// A device whose user has `count` items of about 4 KB on the server (so the fresh state
    /// is several of the server's download messages), and one item made offline; sync is then
    /// terminated and enabled again, and the session, suspended, waits for `resume()` to reset.
    /// Returns the names by id of every item the device should end with.
    static func prepare(_ url: String, subject: String, count: Int) async throws -> (SessionTestApp, SyncSession, ErrorLog, [ObjectId: String]) {
        let device = try await SessionTestApp(url: url, subject: subject) { $0.reconnectDelayMinMs = 50; $0.reconnectDelayMaxMs = 200 }
        let errors = ErrorLog()
        device.app.errorHandler = { _, e in errors.add(e) }
        let s = try device.open("a.ferry", options: SyncOpenOptions(clientResetMode: .recoverUnsyncedChanges))
        try await s.subscribe("ownerId == '\(device.user.id)'")
        var expected: [ObjectId: String] = [:]
        let padding = String(repeating: "x", count: 4_000)
        for batch in 0..<(count / 40) {
            try ClientResetSyncTests.write(s) { db in
                for n in 0..<40 {
                    let id = ObjectId.generate(), name = "item \(batch * 40 + n) " + padding
                    expected[id] = name
                    try db.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(device.user.id)), (2, .string(name)), (3, .int(1))])
                }
            }
        }
        try await s.waitUpload()
        s.suspend()
        let offline = ObjectId.generate()
        try s.createItem(offline, owner: device.user.id, name: "made offline")
        expected[offline] = "made offline"
        try await ClientResetSyncTests.terminateAndEnable(url)
        return (device, s, errors, expected)
    }

    /// Installs the probe on the loop thread (where the session reads it) before returning.
    static func probe(_ s: SyncSession, _ body: @escaping @Sendable (SyncSession, Int) -> Void) async {
        let installed = Arrival<Void>()
        _ = s.app.loop.post {
            s.resetStagingProbe = { body(s, $0) }
            installed.deliver(())
        }
        _ = await installed.wait()
    }

    static func step(_ s: SyncSession, _ staged: Int) -> Staging.Step {
        Staging.Step(run: s.reset?.ident ?? 0, staged: staged, rows: (try? s.database.stagedResetChangesetCount()) ?? -1,
                     items: (try? s.database.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []).count) ?? -1)
    }

    static func names(_ s: SyncSession) throws -> [ObjectId: String] {
        var out: [ObjectId: String] = [:]
        for row in try s.database.query(classIndex: 0, query: "TRUEPREDICATE", arguments: []) {
            if case .objectId(let id) = row[0], case .string(let name) = row[2] { out[id] = name }
        }
        return out
    }

    @Test func aFreshDownloadOfManyMessagesIsStagedUntilItsLastMessage() async throws {
        try await SyncTestServer.withServer(secrets: AdminAPI.secrets) { url in
            let (device, s, errors, expected) = try await Self.prepare(url, subject: "reset-staged", count: 240)
            defer { s.close(); device.app.close() }
            let staging = Staging()
            await Self.probe(s) { s, staged in staging.add(Self.step(s, staged)) }
            s.resume()
            let (error, report) = await ClientResetSyncTests.resetReport(errors)
            #expect(error?.isFatal == false)
            #expect(report?.entries.map(\.reason) == ["created on this device and not yet synced"])

            let steps = staging.all
            #expect(steps.count >= 3, "the fresh state came in \(steps.count) messages")
            #expect(Set(steps.map(\.run)).count == 1)
            #expect(steps.map(\.staged) == steps.map(\.staged).sorted())
            // Each message was in the file once staged, and the device's data stayed as it was
            // (240 synced items and the offline one) until the last message.
            #expect(steps.allSatisfy { $0.rows == $0.staged && $0.items == 241 }, "\(steps)")
            #expect(try s.database.stagedResetChangesetCount() == 0)
            #expect(try Self.names(s) == expected)
            // One staged changeset (at most a message) was decoded at a time, not the state.
            let peak = s.database.lastResetPeakInstructions
            #expect(peak > 0 && peak < 240 / 2, "peak \(peak) instructions held")

            try await s.waitUpload()
            #expect(s.state == .active)
        }
    }

    @Test func aResetCutOffMidDownloadStartsOverAndLeavesNothingStaged() async throws {
        try await SyncTestServer.withServer(secrets: AdminAPI.secrets) { url in
            let (device, s, errors, expected) = try await Self.prepare(url, subject: "reset-staged-cut", count: 160)
            defer { s.close(); device.app.close() }
            // Rows an earlier run left (as after a crash mid-download): a ghost object that
            // would appear if the new run did not start from scratch.
            let ghost = ObjectId.generate()
            try s.database.stageResetDownload([ChangesetCodec.encode(Changeset(timestamp: 0, instructions: [
                .create(table: "Item", key: .objectId(ghost), fields: [FieldValue(name: "ownerId", value: .string(device.user.id)),
                                                                       FieldValue(name: "itemName", value: .string("ghost"))]),
            ]))])
            #expect(try s.database.stagedResetChangesetCount() == 1)

            let staging = Staging()
            // The first message staged, the connection drops; the reset starts over on the next.
            await Self.probe(s) { s, staged in
                staging.add(Self.step(s, staged))
                if staging.cutOnce() { s.connection?.drop(FerryError(.io, "the test cut the connection mid-download")) }
            }
            let token = s.observeConnectionState { _, new in
                if new == .disconnected, staging.wasCut { staging.disconnected(rows: (try? s.database.stagedResetChangesetCount()) ?? -1) }
            }
            defer { token.cancel() }
            s.resume()
            let (error, report) = await ClientResetSyncTests.resetReport(errors)
            #expect(error?.isFatal == false)
            #expect(report?.entries.map(\.reason) == ["created on this device and not yet synced"])

            let steps = staging.all
            let runs = steps.map(\.run).reduce(into: [UInt64]()) { if $0.last != $1 { $0.append($1) } }
            #expect(runs.count == 2, "\(steps)")
            // The ghost was cleared when the first run began, the first run's rows when its
            // connection dropped: the file only ever held the current run's download.
            #expect(steps.allSatisfy { $0.rows == $0.staged }, "\(steps)")
            #expect(staging.stagedRowsAtDisconnects.first == 0)
            #expect(steps.allSatisfy { $0.items == 161 })
            #expect(try s.database.stagedResetChangesetCount() == 0)
            #expect(try Self.names(s) == expected)
            #expect(try s.database.syncMetadata().clientFileIdent == runs.last)

            try await s.waitUpload()
            #expect(s.state == .active)
        }
    }
}
