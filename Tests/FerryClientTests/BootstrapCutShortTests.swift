import FerryClient
import FerryCore
import Foundation
import Synchronization
import Testing

/// Issue 22, point 11: the server records a subscription set as what a device's data reflects
/// just before its bootstrap goes out. A connection lost before the device integrated the
/// bootstrap's last message left the device with the set still pending; it bound again and
/// sent the set again, which the server took as unchanged: it sent only what changed since
/// the device's version, and the objects that had entered the view never arrived, although the
/// set then read complete. Now a pending set is sent after the set the data reflects. (With
/// `firstSet` the device is still at version 0, whose catch-up sends everything anyway: that
/// case passed before too; it checks that naming the empty set, version 0, works.)
@Suite("A bootstrap cut short before the device integrated it")
struct BootstrapCutShortTests {
    @Test(arguments: [false, true])
    func whatEnteredTheViewArrivesAfterTheConnectionDrops(firstSet: Bool) async throws {
        try await SyncTestServer.withSingleServer { url in
            let subject = "cut-bootstrap-\(firstSet)"
            let writer = try await SessionTestApp(url: url, subject: subject)
            defer { writer.app.close() }
            let sw = try writer.open("w.ferry")
            defer { sw.close() }
            try await sw.subscribe("ownerId == '\(writer.user.id)'")
            try sw.createItem(owner: writer.user.id, name: "entered", complexity: 3)
            try await sw.waitUpload()

            // The device's bootstrap of `cutSet` loses its last message once: the connection
            // drops (the client closes on a malformed message) before it is integrated.
            let cutSet: UInt64 = firstSet ? 1 : 2
            let cuts = Atomic<Int>(0)
            let proxy = try HostileServerProxy(serverURL: url) { message in
                if case .download(_, _, _, cutSet, _, true, _) = message, cuts.add(1, ordering: .relaxed).oldValue == 0 { return [0xFF] }
                return ProtocolCodec.encode(message)
            }
            defer { proxy.stop() }
            let device = try await SessionTestApp(url: proxy.url, subject: subject) {
                $0.reconnectDelayMinMs = 50
                $0.reconnectDelayMaxMs = 200
            }
            defer { device.app.close() }
            let sd = try device.open("d.ferry")
            defer { sd.close() }
            if !firstSet {
                // A set the item is not in: the device is then at the head, so the next set's
                // bootstrap is at the device's own version.
                try await sd.subscribe("complexity < 0")
                #expect(try sd.itemNames().isEmpty)
            }
            try await sd.subscribe("ownerId == '\(writer.user.id)'")
            #expect(cuts.load(ordering: .relaxed) >= 1, "the proxy never cut the bootstrap")
            try await sd.waitDownload()
            #expect(try sd.itemNames() == ["entered"])
            #expect(try sd.subscriptions().state == .complete)
        }
    }
}
