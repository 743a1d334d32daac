@testable import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Sessions under control (issue 4): multiplexing, connection state, suspend and resume,
/// reconnect, waits that never hang — against a real in-process ferry-server.
@Suite("Sync sessions: state, pause, reconnect, waits")
struct SessionControlTests {
    @Test func sessionsOfAUserShareOneConnectionUnlessMultiplexingIsOff() async throws {
        try await SyncTestServer.withServer(secrets: AdminAPI.secrets) { url in
            for multiplex in [true, false] {
                let a = try await SessionTestApp(url: url, subject: "mux-\(multiplex)") { $0.multiplexSessions = multiplex }
                let sessions = try (0..<3).map { try a.open("db\($0).ferry") }
                let recorders = sessions.map(StateRecorder.init)
                for r in recorders { #expect(await r.reached(.connected)) }
                #expect(try await AdminAPI.waitConnections(url, multiplex ? 1 : 3) == (multiplex ? 1 : 3))
                // Each session syncs on its own all the same.
                for (n, s) in sessions.enumerated() {
                    try await s.subscribe("ownerId == '\(a.user.id)'")
                    try s.createItem(owner: a.user.id, name: "from db\(n)")
                    try await s.waitUpload()
                }
                for s in sessions { try await s.waitDownload() }
                #expect(try sessions[0].itemNames() == ["from db0", "from db1", "from db2"])
                for s in sessions { s.close() }
                a.app.close()
                #expect(try await AdminAPI.waitConnections(url, 0) == 0)
            }
        }
    }

    @Test func connectionStateIsReadableAndObservedStepByStep() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await SessionTestApp(url: url, subject: "states")
            let s = try a.open("states.ferry")
            let r = StateRecorder(s)
            #expect(s.state == .active)
            #expect(await r.reached(.connected))
            #expect(s.connectionState == .connected)
            s.suspend()
            #expect(s.state == .paused)
            #expect(await r.reached(.disconnected, times: 2))
            #expect(s.connectionState == .disconnected)
            s.resume()
            #expect(await r.reached(.connected, times: 2))
            #expect(s.state == .active)
            let steps = r.transitions.map { "\($0.0)->\($0.1)" }
            #expect(steps == ["disconnected->connecting", "connecting->connected", "connected->disconnected",
                              "disconnected->connecting", "connecting->connected"])
            // A cancelled token stops its observer; others keep observing.
            r.token?.cancel()
            let later = StateRecorder(s)
            s.suspend()
            #expect(await later.reached(.disconnected))
            s.close()
            #expect(s.state == .inactive)
            #expect(r.transitions.count == 5)
            a.app.close()
        }
    }

    @Test func suspendPausesBothDirectionsOfOneSessionOnly() async throws {
        try await SyncTestServer.withServer { url in
            let a = try await SessionTestApp(url: url, subject: "pause")
            let paused = try a.open("paused.ferry"), running = try a.open("running.ferry")
            let other = try await SessionTestApp(url: url, subject: "pause")
            let observer = try other.open("observer.ferry")
            let q = "ownerId == '\(a.user.id)'"
            for s in [paused, running, observer] { try await s.subscribe(q) }

            paused.suspend()
            let pr = StateRecorder(paused)
            #expect(paused.state == .paused)
            #expect(await pr.log.wait { _ in paused.connectionState == .disconnected })
            #expect(paused.connectionState == .disconnected)
            #expect(running.connectionState == .connected)
            try paused.createItem(owner: a.user.id, name: "written while paused")
            try running.createItem(owner: a.user.id, name: "from the running session")
            try observer.createItem(owner: a.user.id, name: "from another device")
            // An upload wait on the paused session stays pending until it resumes.
            let pausedUpload = Arrival<FerryError?>()
            paused.waitForUpload { pausedUpload.deliver($0) }
            try await running.waitUpload()
            try await observer.waitUpload()
            try await running.waitDownload()
            try await observer.waitDownload()
            #expect(try running.itemNames() == ["from the running session", "from another device"])
            #expect(try observer.itemNames() == ["from the running session", "from another device"])
            // Nothing came down to the paused session, nothing went up from it.
            #expect(try paused.itemNames() == ["written while paused"])
            #expect(await pausedUpload.wait(seconds: 0.5) == nil)

            paused.resume()
            let resumedUpload = await pausedUpload.wait()
            #expect(resumedUpload != nil && resumedUpload! == nil, "\(String(describing: resumedUpload))")
            try await paused.waitDownload()
            try await observer.waitDownload()
            let all: Set = ["written while paused", "from the running session", "from another device"]
            #expect(try paused.itemNames() == all)
            #expect(try observer.itemNames() == all)
            for s in [paused, running, observer] { s.close() }
            a.app.close(); other.app.close()
        }
    }

    @Test func waitsCompleteWithAnErrorInsteadOfHanging() async throws {
        // The server is unreachable: waits stay pending until the session ends, then fail.
        let port = unusedLoopbackPort()
        let dir = SyncTestServer.temporaryDirectory("waits")
        try await SyncTestServer.withServer { url in
            let first = try await SessionTestApp(url: url, subject: "waits", directory: dir)
            first.app.close()
        }
        let offline = try SessionTestApp(cachedIn: dir, url: "http://127.0.0.1:\(port)")
        let s = try offline.open("waits.ferry")
        try s.createItem(owner: offline.user.id, name: "never uploaded")
        let upload = Arrival<FerryError?>(), download = Arrival<FerryError?>(), subs = Arrival<FerryError?>()
        s.waitForUpload { upload.deliver($0) }
        s.waitForDownload { download.deliver($0) }
        let v = try s.updateSubscriptions { $0.add(name: "x", objectType: "Item", query: "complexity > 0") }
        s.waitForSubscriptions(version: v) { subs.deliver($0) }
        // Logging out ends the session: every wait completes with the reason.
        let out = Arrival<Result<Void, FerryError>>()
        offline.app.logOut(offline.user) { out.deliver($0) }
        for w in [upload, download, subs] {
            let r = await w.wait()
            #expect(r != nil, "a wait hung after the log out")
            #expect(r??.code == .sync)
        }
        #expect(s.state == .inactive)
        _ = await out.wait()
        // A closed session fails new waits at once.
        s.close()
        let late = Arrival<FerryError?>()
        s.waitForUpload { late.deliver($0) }
        let lateError = await late.wait()
        #expect(lateError != nil && lateError! != nil)
        offline.app.close()
    }

    @Test func closingTheAppOrLoggingOutEndsPausedSessionsToo() async throws {
        try await SyncTestServer.withServer { url in
            for logOut in [false, true] {
                let a = try await SessionTestApp(url: url, subject: "paused-end-\(logOut)")
                let s = try a.open("p.ferry")
                #expect(await StateRecorder(s).reached(.connected))
                s.suspend()
                let pending = Arrival<FerryError?>()
                s.waitForDownload { pending.deliver($0) }
                if logOut {
                    let out = Arrival<Result<Void, FerryError>>()
                    a.app.logOut(a.user) { out.deliver($0) }
                    _ = await out.wait()
                } else {
                    a.app.close()
                }
                let r = await pending.wait()
                #expect(r != nil && r! != nil, "a wait on a paused session hung or succeeded")
                #expect(s.state == .inactive)
                // Resuming an ended session does not bring it back.
                s.resume()
                #expect(s.state == .inactive)
                s.close()
                a.app.close()
            }
        }
    }

    @Test func reconnectTriesAtOnceAndResetsTheBackoff() async throws {
        let port = unusedLoopbackPort()
        let dir = SyncTestServer.temporaryDirectory("reconnect"), data = SyncTestServer.temporaryDirectory("data")
        try await SyncTestServer.withServer(dataDirectory: data) { url in
            let first = try await SessionTestApp(url: url, subject: "reconnect", directory: dir)
            first.app.close()
        }
        // A backoff far longer than the test's deadline: only reconnect() can connect in time.
        let a = try SessionTestApp(cachedIn: dir, url: "http://127.0.0.1:\(port)") {
            $0.reconnectDelayMinMs = 600_000
            $0.reconnectDelayMaxMs = 600_000
        }
        let s = try a.open("r.ferry")
        let r = StateRecorder(s)
        #expect(await r.reached(.disconnected))
        try await SyncTestServer.withServer(dataDirectory: data, port: port, secrets: AdminAPI.secrets) { url in
            a.app.reconnect()
            #expect(await r.reached(.connected))
            // Connected: reconnect() changes nothing (no new connection, no new state).
            let before = r.transitions.count
            a.app.reconnect()
            try await s.waitDownload()
            #expect(r.transitions.count == before)
            #expect(try await AdminAPI.connections(url) == 1)
            s.close()
        }
        a.app.close()
    }
}

/// The reconnection backoff (SPEC F-BACKOFF), as a pure function of the attempt.
@Suite("Sync: reconnection backoff")
struct BackoffTests {
    @Test func doublesFromTheMinimumUpToTheCapWithJitterInTheUpperHalf() {
        let lows = (1...12).map { ReconnectBackoff.delay(attempt: $0, minMs: 1_000, maxMs: 16_000, random: { $0.lowerBound }) }
        let highs = (1...12).map { ReconnectBackoff.delay(attempt: $0, minMs: 1_000, maxMs: 16_000, random: { $0.upperBound }) }
        #expect(highs == [1_000, 2_000, 4_000, 8_000, 16_000, 16_000, 16_000, 16_000, 16_000, 16_000, 16_000, 16_000])
        #expect(lows == highs.map { $0 / 2 })
        // No overflow however long the outage; a first attempt (after a successful connection
        // reset the count) waits about the minimum again.
        #expect(ReconnectBackoff.delay(attempt: 10_000, minMs: 1_000, maxMs: 16_000, random: { $0.upperBound }) == 16_000)
        #expect(ReconnectBackoff.delay(attempt: 1, minMs: 50, maxMs: 400, random: { $0.upperBound }) == 50)
        var seen = Set<UInt64>()
        for _ in 0..<200 { seen.insert(ReconnectBackoff.delay(attempt: 3, minMs: 1_000, maxMs: 16_000, random: { UInt64.random(in: $0) })) }
        #expect(seen.allSatisfy { (2_000...4_000).contains($0) } && seen.count > 50)
    }
}
