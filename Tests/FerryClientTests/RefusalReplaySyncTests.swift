import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Issue 25: the deterministic simulation found that a compensating write whose ERROR 231 was
/// lost with the connection was never reported: the device had taken the download that
/// acknowledged (and reverted) the write, so it never sent it again, and the host was never
/// told why its object went. Now the device's BIND says through which local version it has
/// every answer and the server sends the refusals after it again (`RefusalLedger`): the host
/// gets the error 231 with the object, and the write's receipt ends rejected. Real client,
/// real server; a proxy turns the first 231 into bytes the client cannot read, so it drops the
/// connection right after the acknowledgement.
@Suite("A compensating write whose answer was lost with the connection")
struct RefusalReplaySyncTests {
    /// A proxy in front of the server at `url` that turns the first ERROR 231 into a byte the
    /// client cannot read (it drops the connection), and counts the 231s it saw.
    static func cuttingTheFirstRefusal(_ url: String) throws -> (HostileServerProxy, LockedValue<Int>) {
        let cuts = LockedValue(0)
        let proxy = try HostileServerProxy(serverURL: url) { message in
            if case .error(let e) = message, e.code == ProtocolError.Code.compensatingWrite,
               cuts.withLock({ (n: inout Int) -> Int in defer { n += 1 }; return n }) == 0 {
                return [0xFF]
            }
            return ProtocolCodec.encode(message)
        }
        return (proxy, cuts)
    }

    @Test func isReportedOnceTheDeviceIsBackAndItsReceiptEndsRejected() async throws {
        try await SyncTestServer.withSingleServer { url in
            let (proxy, cuts) = try Self.cuttingTheFirstRefusal(url)
            defer { proxy.stop() }
            let device = try await SessionTestApp(url: proxy.url, subject: "refusal-replay-\(UInt64.random(in: 0...UInt64.max))") {
                $0.reconnectDelayMinMs = 50
                $0.reconnectDelayMaxMs = 200
            }
            defer { device.app.close() }
            let errors = EventLog<SyncError>()
            device.app.errorHandler = { _, e in errors.add(e) }
            let s = try device.open("d.ferry")
            defer { s.close() }
            try await s.subscribe("complexity <= 4")
            // Outside the view: the server refuses it (the oracle: this key, this receipt).
            let id = ObjectId.generate()
            try s.database.beginWrite()
            try s.database.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(device.user.id)), (2, .string("outside")), (3, .int(7))])
            let receipt = try s.database.commit()
            let reported = await errors.wait(seconds: 60) { all in all.contains { $0.code == ProtocolError.Code.compensatingWrite } }
            #expect(reported, "no compensating write reached the host: \(errors.all.map(\.message))")
            // The proxy saw the 231 twice: the one it cut, and the one sent again.
            #expect(cuts.withLock { $0 } == 2)
            let refusals = errors.all.filter { $0.code == ProtocolError.Code.compensatingWrite }
            #expect(refusals.count == 1)
            #expect(refusals.first?.compensatingWrites.map(\.primaryKey) == [.objectId(id)])
            // The session kept what the revert took across the reconnect: the host can put it back.
            let reverted = refusals.first?.revertedObjects ?? []
            #expect(reverted.map(\.primaryKey) == [.objectId(id)] && reverted.first?.revert == .removed)
            #expect(reverted.first?.values.contains { $0.value == .int(7) } == true, "\(reverted)")
            let status = try await s.receipt(receipt, reaching: .acknowledged)
            #expect(status.state == .rejected && status.compensatingWrites.map(\.primaryKey) == [.objectId(id)])
            #expect(try s.itemNames().isEmpty)
        }
    }

    /// The same, when the process ends between the acknowledgement and its 231 (the app is
    /// closed before it reconnects): the next process's session binds with the version it has
    /// every answer through, gets the 231 (without the reverted values, which were in the
    /// ended process's memory), and the receipt never reads acknowledged on the way.
    @Test func isReportedToTheNextProcessAndItsReceiptNeverReadsAcknowledgedFirst() async throws {
        try await SyncTestServer.withSingleServer { url in
            let (proxy, cuts) = try Self.cuttingTheFirstRefusal(url)
            defer { proxy.stop() }
            let subject = "refusal-replay-restart-\(UInt64.random(in: 0...UInt64.max))"
            // The first process does not reconnect in the test's time.
            let first = try await SessionTestApp(url: proxy.url, subject: subject) {
                $0.reconnectDelayMinMs = 600_000
                $0.reconnectDelayMaxMs = 600_000
            }
            let id = ObjectId.generate()
            let receipt: UInt64
            do {
                let s = try first.open("d.ferry")
                try await s.subscribe("complexity <= 4")
                let states = StateRecorder(s)
                try s.database.beginWrite()
                try s.database.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(first.user.id)), (2, .string("outside")), (3, .int(7))])
                receipt = try s.database.commit()
                // The 231 is cut: the client drops the connection right after the acknowledgement.
                let dropped = await states.log.wait(seconds: 60) { $0.contains { $0.0 == .connected } }
                #expect(dropped, "the connection never left connected: \(states.transitions)")
                #expect(cuts.withLock { $0 } == 1)
                #expect(try s.itemNames().isEmpty, "the acknowledging download reverted the write")
                s.close()
            }
            first.app.close()

            let next = try SessionTestApp(cachedIn: first.directory, url: proxy.url) {
                $0.reconnectDelayMinMs = 50
                $0.reconnectDelayMaxMs = 200
            }
            defer { next.app.close() }
            let errors = EventLog<SyncError>()
            next.app.errorHandler = { _, e in errors.add(e) }
            let s = try next.open("d.ferry")
            defer { s.close() }
            #expect(try s.database.receiptStatus(receipt).state != .acknowledged)
            let reported = await errors.wait(seconds: 60) { all in all.contains { $0.code == ProtocolError.Code.compensatingWrite } }
            #expect(reported, "no compensating write reached the next process: \(errors.all.map(\.message))")
            let refusal = errors.all.first { $0.code == ProtocolError.Code.compensatingWrite }
            #expect(refusal?.compensatingWrites.map(\.primaryKey) == [.objectId(id)])
            #expect(refusal?.revertedObjects.isEmpty == true, "the ended process held what the revert took")
            let status = try await s.receipt(receipt, reaching: .acknowledged)
            #expect(status.state == .rejected)
        }
    }
}
