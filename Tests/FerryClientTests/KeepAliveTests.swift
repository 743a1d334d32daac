@testable import FerryClient
import Testing

/// When a connection pings and drops (`KeepAlive`), on a clock the test moves: no socket.
@Suite struct KeepAliveTests {
    @Test func aQuietConnectionPingsOncePerIntervalAndWakesOnlyWhenSomethingIsDue() {
        var k = KeepAlive(now: 1_000, readTimeoutMs: 120_000, pingIntervalMs: 60_000)
        #expect(k.nextTickMs(after: 1_000) == 60_000, "the first ping is the first thing due")
        #expect(k.tick(at: 30_000) == .wait)
        #expect(k.tick(at: 61_000) == .ping)
        #expect(k.tick(at: 61_000) == .wait, "a ping is not sent twice")
        // The pong came at 61,050: the next ping a whole interval later, and that is when it wakes.
        k.received(at: 61_050)
        #expect(k.nextTickMs(after: 61_050) == 60_000)
        // Idle for ten minutes: ten wake-ups (every one a ping answered), not forty as at a
        // quarter of the interval.
        var now: UInt64 = 61_050, wakeups = 0
        while now < 661_050 {
            now += k.nextTickMs(after: now)
            wakeups += 1
            if k.tick(at: now) == .ping { k.received(at: now + 20) }
        }
        #expect(wakeups == 10)
    }

    @Test func aSilentServerIsDroppedAtTheReadTimeout() {
        var k = KeepAlive(now: 0, readTimeoutMs: 1_000, pingIntervalMs: 200)
        var now: UInt64 = 0, pings = 0
        while true {
            now += k.nextTickMs(after: now)
            let action = k.tick(at: now)
            if action == .drop { break }
            if action == .ping { pings += 1 }
            #expect(now < 2_000, "dropped in time")
        }
        #expect(now == 1_000 && pings == 4, "pinged at 200, 400, 600, 800; dropped at 1,000 (\(now), \(pings))")
    }

    @Test func dataPushesTheReadTimeoutBack() {
        var k = KeepAlive(now: 0, readTimeoutMs: 1_000, pingIntervalMs: 5_000)
        k.received(at: 900)
        #expect(k.tick(at: 1_000) == .wait)
        #expect(k.nextTickMs(after: 1_000) == 900)
        k.received(at: 100)
        #expect(k.lastReceivedMs == 900, "time does not go back")
        #expect(k.tick(at: 1_900) == .drop)
    }

    @Test func hugeSettingsNeitherTrapNorSpin() {
        var k = KeepAlive(now: 5, readTimeoutMs: .max, pingIntervalMs: .max)
        #expect(k.tick(at: .max - 1) == .wait)
        #expect(k.nextTickMs(after: 5) == UInt64.max - 5)
        var same = KeepAlive(now: 100, readTimeoutMs: 1, pingIntervalMs: 1)
        #expect(same.nextTickMs(after: 100) == 10, "at least the minimum: a clock that stands still cannot spin the loop")
        #expect(same.tick(at: 101) == .drop)
    }
}
