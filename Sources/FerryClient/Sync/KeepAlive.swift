import FerryCore

/// When an open connection pings the server and when it gives up on a silent one (issue 25:
/// decided apart from the timer that carries it out; `KeepAliveTests`). Times are monotonic
/// milliseconds.
///
/// Invariants: a connection that received nothing for `readTimeoutMs` is dropped; one quiet
/// (nothing received, no ping sent) for `pingIntervalMs` pings; the timer wakes only when one
/// of those is due (`nextTickMs`), not at a fixed fraction of the interval: an idle connection
/// wakes about once per ping interval (SPEC: idle means asleep).
package struct KeepAlive: Sendable, Equatable {
    package let readTimeoutMs: UInt64
    package let pingIntervalMs: UInt64
    package private(set) var lastReceivedMs: UInt64
    package private(set) var lastPingMs: UInt64

    package enum Action: Sendable, Equatable {
        /// Nothing came for the read timeout: drop the connection (it reconnects).
        case drop
        /// Send a ping.
        case ping
        /// Nothing due yet.
        case wait
    }

    /// The connection opened at `now`.
    package init(now: UInt64, readTimeoutMs: UInt64, pingIntervalMs: UInt64) {
        self.readTimeoutMs = readTimeoutMs
        self.pingIntervalMs = pingIntervalMs
        lastReceivedMs = now
        lastPingMs = now
    }

    /// Something arrived from the server at `now`.
    package mutating func received(at now: UInt64) { lastReceivedMs = max(lastReceivedMs, now) }

    /// What is due at `now` (a ping due is recorded as sent).
    package mutating func tick(at now: UInt64) -> Action {
        if now >= lastReceivedMs.addingSaturated(readTimeoutMs) { return .drop }
        if now >= max(lastReceivedMs, lastPingMs).addingSaturated(pingIntervalMs) {
            lastPingMs = now
            return .ping
        }
        return .wait
    }

    /// How long after `now` the next tick is due: when the read timeout or the next ping
    /// falls due, whichever is first (at least `minimumMs`, so a clock that stands still
    /// cannot spin the loop).
    package func nextTickMs(after now: UInt64, minimumMs: UInt64 = 10) -> UInt64 {
        let due = min(lastReceivedMs.addingSaturated(readTimeoutMs), max(lastReceivedMs, lastPingMs).addingSaturated(pingIntervalMs))
        return max(minimumMs, due > now ? due - now : 0)
    }
}
