/// How many failed attempts in a row a connection's next retry waits for (SPEC F-BACKOFF), as
/// a value (issue 25: decided apart from the socket and the timer; `ReconnectBackoffTests`).
///
/// Invariants: a connection the server serves (anything but a connection-level transient
/// ERROR) starts the count again; one the server ends at once with such an ERROR (sync paused
/// or terminated by an admin, too many connections) counts as failed, so the wait grows while
/// the server keeps refusing instead of restarting from its minimum at every socket that
/// opened; the host's `reconnect()` starts from scratch.
package struct ReconnectBackoff: Sendable, Equatable {
    /// Failures in a row, this one's included once `failed()` counted it.
    package private(set) var attempts = 0
    /// Connections in a row the server refused with a connection-level transient ERROR first.
    package private(set) var refusedInARow = 0

    package init() {}

    /// A socket opened: it counts as failed until the server serves it.
    package mutating func opened() { attempts = refusedInARow }

    /// A message came on the open socket; `refusal`: a connection-level transient ERROR.
    package mutating func received(refusal: Bool) {
        if refusal {
            refusedInARow += 1
        } else {
            refusedInARow = 0
            attempts = 0
        }
    }

    /// The socket closed or never opened: the attempt number the retry waits for.
    package mutating func failed() -> Int {
        attempts += 1
        return attempts
    }

    /// The host asked to try again now.
    package mutating func reset() { self = ReconnectBackoff() }

    /// The wait before retry number `attempt` (1 after the first failure): the base doubles
    /// from `minMs` up to `maxMs`, and the wait is a random point in the base's upper half, so
    /// devices cut off together do not come back together.
    package static func delay(attempt: Int, minMs: UInt64, maxMs: UInt64, random: (ClosedRange<UInt64>) -> UInt64) -> UInt64 {
        let doublings = UInt64(min(max(attempt - 1, 0), 40))
        let (scaled, overflow) = minMs.multipliedReportingOverflow(by: UInt64(1) << doublings)
        let base = overflow ? maxMs : min(scaled, maxMs)
        return base / 2 + random(0...(base - base / 2))
    }
}
