import FerryCore
import Foundation
import Testing
@testable import FerryClient

/// Issue 22, point 2: a hostile or broken server must not crash the host. The client added a
/// DOWNLOAD's `downloadable` to its byte counter unchecked, so one DOWNLOAD with 2^64-1 trapped
/// inside the host program. Now every integer of a message is range-checked where it is
/// decoded (at most 2^63-1: a larger one makes the message malformed, and the connection is
/// dropped and tried again), and the progress counters add the server's figures saturating.
@Suite("Sync: a server's extreme figures")
struct HostileServerFiguresTests {
    static func downloads(_ m: ProtocolMessage, downloadable: UInt64) -> [UInt8] {
        guard case let .download(s, v, ack, sv, _, last, cs) = m else { return ProtocolCodec.encode(m) }
        return ProtocolCodec.encode(.download(session: s, serverVersion: v, uploadAcknowledged: ack, subscriptionVersion: sv,
                                              downloadableBytes: downloadable, isLastInBatch: last, changesets: cs))
    }

    @Test func extremeDownloadFiguresNeitherTrapNorStopSync() async throws {
        try await SyncTestServer.withSingleServer { url in
            // The largest figure that decodes: the client takes it as a (wrong) estimate.
            let proxy = try HostileServerProxy(serverURL: url) { Self.downloads($0, downloadable: UInt64(Int64.max)) }
            defer { proxy.stop() }
            // Retries come quickly: each connection meets the malformed message again below.
            let device = try await SessionTestApp(url: proxy.url, subject: "extreme-figures") {
                $0.reconnectDelayMinMs = 50
                $0.reconnectDelayMaxMs = 500
            }
            let session = try device.open("figures.ferry")
            let reports = EventLog<SyncProgress>()
            let token = session.addProgressNotifier(direction: .download, mode: .reportIndefinitely) { reports.add($0) }
            try await session.subscribe("ownerId == '\(device.user.id)'")
            try session.createItem(owner: device.user.id, name: "first")
            try await session.waitUpload()
            #expect(await reports.wait { $0.contains { $0.transferableBytes >= UInt64(Int64.max) } },
                    "the server's figure never reached the progress: \(reports.all)")
            for r in reports.all { #expect(r.progressEstimate >= 0 && r.progressEstimate <= 1, "\(r)") }

            // Past the protocol's range: the message is malformed, the connection dropped (the
            // client tries again), nothing traps, and nothing of it is integrated.
            let states = StateRecorder(session)
            proxy.rewrite.withLock { $0 = { Self.downloads($0, downloadable: UInt64.max) } }
            let other = try await SessionTestApp(url: url, subject: "extreme-figures")
            let writer = try other.open("writer.ferry")
            try await writer.subscribe("ownerId == '\(device.user.id)'")
            try writer.createItem(owner: device.user.id, name: "second")
            try await writer.waitUpload()
            #expect(await states.reached(.disconnected), "the client kept a connection that sent 2^64-1")
            #expect(try session.itemNames() == ["first"])

            // An honest server again: the client catches up.
            proxy.rewrite.withLock { $0 = { ProtocolCodec.encode($0) } }
            #expect(await states.reached(.connected, seconds: 60))
            try await session.waitDownload(seconds: 60)
            #expect(try session.itemNames() == ["first", "second"])
            token.cancel()
        }
    }

    /// The counters themselves, fed 2^64-1 directly (the decoder keeps such figures from them).
    @Test func progressCountersSaturate() {
        let notifiers = ProgressNotifiers { work in work(); return true }
        let reports = EventLog<SyncProgress>()
        let token = notifiers.register(.download, .reportIndefinitely) { reports.add($0) }
        notifiers.expectDownload()
        notifiers.downloaded(bytes: 10, remaining: UInt64.max, settled: false)
        notifiers.downloaded(bytes: UInt64.max, remaining: UInt64.max, settled: false)
        notifiers.uploadable(adding: UInt64.max)
        notifiers.uploadable(adding: UInt64.max)
        notifiers.uploaded(adding: UInt64.max)
        notifiers.uploaded(adding: 5)
        #expect(reports.all.allSatisfy { $0.progressEstimate >= 0 && $0.progressEstimate <= 1 })
        #expect(reports.all.contains { $0.transferableBytes == UInt64.max })
        token.cancel()
    }
}
