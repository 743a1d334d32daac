@testable import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Write receipts against a real in-process server: local, uploaded, acknowledged, rejected
/// with the compensating writes, waited for with callbacks and async, across a restart.
@Suite struct WriteReceiptSyncTests {
    private func commit(_ db: Database, _ body: (Database) throws -> Void) throws -> UInt64 {
        try db.beginWrite()
        do { try body(db) } catch { try? db.cancel(); throw error }
        return try db.commit()
    }

    private func item(_ d: TestDevice, _ id: ObjectId, complexity: Int64) throws -> UInt64 {
        try commit(d.db) { try $0.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(d.user.id)), (2, .string("x")), (3, .int(complexity))]) }
    }

    /// Waits (with a timeout) for the receipt to reach `state` through the callback API.
    private func wait(_ s: SyncSession, _ receipt: UInt64, _ state: ReceiptState) async throws -> ReceiptStatus {
        let done = Arrival<Result<ReceiptStatus, FerryError>>()
        try s.waitForReceipt(receipt, reaching: state) { done.deliver($0) }
        guard let r = await done.wait(seconds: 30) else { throw FerryError(.timeout, "receipt \(receipt) did not reach \(state)") }
        return try r.get()
    }

    @Test func aReceiptGoesFromLocalToAcknowledged() async throws {
        try await SyncTestServer.withServer { url in
            let d = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { d.close() }
            try await d.subscribe("complexity <= 4")
            // Paused: the commit stays local until the session resumes.
            d.session.suspend()
            let r = try item(d, ObjectId.generate(), complexity: 1)
            #expect(r > 0)
            #expect(try d.db.receiptStatus(r).state == .local)
            d.session.resume()
            let uploaded = try await wait(d.session, r, .uploaded)
            #expect(uploaded.state >= .uploaded)
            // The async form, raced against a timeout: a wait that is never answered fails here.
            let session = d.session
            let answer = Arrival<Result<ReceiptStatus, any Error>>()
            Task {
                do { answer.deliver(.success(try await session.receipt(r, reaching: .acknowledged))) } catch { answer.deliver(.failure(error)) }
            }
            guard let result = await answer.wait(seconds: 30) else { throw FerryError(.timeout, "receipt \(r) was not acknowledged within 30 s") }
            let status = try result.get()
            #expect(status == ReceiptStatus(receipt: r, state: .acknowledged))
            #expect(try d.db.receiptStatus(r).state == .acknowledged)
            // Already there: a wait completes at once; a wait for rejected ends acknowledged.
            #expect(try await wait(d.session, r, .rejected).state == .acknowledged)
        }
    }

    /// No one waits: a burst of commits still reads acknowledged, its last one included (the
    /// answers before it are complete when the next acknowledgement comes; the last one's
    /// when the acknowledgements pause and the session asks with a MARK).
    @Test func aBurstSettlesWithoutAWaiter() async throws {
        try await SyncTestServer.withServer { url in
            let d = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { d.close() }
            try await d.subscribe("complexity <= 4")
            var receipts: [UInt64] = []
            for _ in 0..<40 { receipts.append(try item(d, ObjectId.generate(), complexity: 1)) }
            let deadline = Date().addingTimeInterval(30)
            while try d.db.receiptStatus(receipts.last!).state != .acknowledged, Date() < deadline {
                try await Task.sleep(for: .milliseconds(10))
            }
            for r in receipts { #expect(try d.db.receiptStatus(r).state == .acknowledged, "receipt \(r)") }
        }
    }

    /// A host that never asks about a receipt makes its session send no MARK to settle them
    /// (each costs the server a storage read and a catch-up); its first question settles with
    /// one MARK what was acknowledged before.
    @Test func noMarkUntilTheHostAsksAboutAReceipt() async throws {
        try await SyncTestServer.withServer { url in
            let d = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { d.close() }
            try await d.subscribe("complexity <= 4")
            var receipts: [UInt64] = []
            for _ in 0..<10 { receipts.append(try item(d, ObjectId.generate(), complexity: 1)) }
            try await d.waitUpload()
            // Acknowledged: a session settling for a reader would have its MARK timer running now.
            let session = d.session
            let idle = Arrival<(marks: Int, timer: Bool)>()
            session.app.loop.post { idle.deliver((session.receiptMarksSent, session.receiptTimer != nil)) }
            let before = try #require(await idle.wait(seconds: 30))
            #expect(before.marks == 0)
            #expect(!before.timer)
            // The first question: the last upload's answer is not settled yet.
            let last = try #require(receipts.last)
            #expect(try d.db.receiptStatus(last).state == .uploaded)
            #expect(try await wait(session, last, .acknowledged).state == .acknowledged)
            for r in receipts { #expect(try d.db.receiptStatus(r).state == .acknowledged, "receipt \(r)") }
            let after = Arrival<Int>()
            session.app.loop.post { after.deliver(session.receiptMarksSent) }
            #expect(await after.wait(seconds: 30) == 1)
        }
    }

    @Test func onlyTheTransactionThatWroteTheRevertedObjectIsRejected() async throws {
        try await SyncTestServer.withServer { url in
            let d = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { d.close() }
            try await d.subscribe("complexity <= 4")
            d.session.suspend()
            let good = ObjectId.generate(), bad = ObjectId.generate()
            // Three transactions in one upload: the middle one leaves the view (231).
            let r1 = try item(d, good, complexity: 1)
            let r2 = try item(d, bad, complexity: 7)
            let r3 = try commit(d.db) { try $0.set(classIndex: 0, key: .objectId(good), property: 2, value: .string("renamed")) }
            d.session.resume()
            let rejected = try await wait(d.session, r2, .acknowledged)
            #expect(rejected.state == .rejected)
            #expect(rejected.compensatingWrites == [.outsideView(objectType: "Item", primaryKey: .objectId(bad))])
            #expect(try await wait(d.session, r1, .acknowledged).state == .acknowledged)
            #expect(try await wait(d.session, r3, .acknowledged).state == .acknowledged)
            // The error handler got the same 231; by then the receipt read rejected.
            let errors = await d.errors.wait(count: 1)
            #expect(errors.first?.code == 231)
        }
    }

    @Test func receiptsSurviveARestart() async throws {
        try await SyncTestServer.withServer { url in
            let dir = SyncTestServer.temporaryDirectory("receipts")
            let first = try await SessionTestApp(url: url, subject: "receipts-restart", directory: dir)
            var s = try first.open("r.ferry")
            let v = try s.updateSubscriptions { $0.add(name: "items", objectType: "Item", query: "complexity <= 4") }
            let subscribed = Arrival<FerryError?>()
            s.waitForSubscriptions(version: v) { subscribed.deliver($0) }
            guard case .some(.none) = await subscribed.wait(seconds: 30) else { Issue.record("the subscription did not complete"); return }
            // Offline: committed, then the process "ends" before anything is sent.
            s.suspend()
            let kept = try commit(s.database) {
                try $0.create(classIndex: 0, values: [(0, .objectId(ObjectId.generate())), (1, .string(first.user.id)), (2, .string("a")), (3, .int(1))])
            }
            let reverted = ObjectId.generate()
            let refused = try commit(s.database) {
                try $0.create(classIndex: 0, values: [(0, .objectId(reverted)), (1, .string(first.user.id)), (2, .string("b")), (3, .int(9))])
            }
            #expect(try s.database.receiptStatus(kept).state == .local)
            s.close()
            first.app.close()

            let second = try SessionTestApp(cachedIn: dir, url: url)
            s = try second.open("r.ferry")
            #expect(try s.database.receiptStatus(kept).state <= .uploaded)
            #expect(try await wait(s, kept, .acknowledged).state == .acknowledged)
            #expect(try await wait(s, refused, .acknowledged).state == .rejected)
            s.close()
            second.app.close()

            // And once more: final states are read from the file.
            let third = try SessionTestApp(cachedIn: dir, url: url)
            s = try third.open("r.ferry")
            defer { s.close(); third.app.close() }
            #expect(try s.database.receiptStatus(kept).state == .acknowledged)
            #expect(try s.database.receiptStatus(refused).compensatingWrites == [.outsideView(objectType: "Item", primaryKey: .objectId(reverted))])
        }
    }

    @Test func unknownReceiptsAndClosedSessionsAreErrors() async throws {
        try await SyncTestServer.withServer { url in
            let d = try await TestDevice(baseURL: url, credentials: .anonymous)
            #expect(throws: FerryError.self) { try d.session.waitForReceipt(1_000_000, reaching: .acknowledged) { _ in } }
            d.session.suspend()
            let r = try item(d, ObjectId.generate(), complexity: 1)
            let done = Arrival<Result<ReceiptStatus, FerryError>>()
            try d.session.waitForReceipt(r, reaching: .acknowledged) { done.deliver($0) }
            d.close()
            let result = await done.wait(seconds: 30)
            guard case .failure(let e)? = result else { Issue.record("the wait did not fail: \(String(describing: result))"); return }
            #expect(e.code == .closed)
        }
    }
}
