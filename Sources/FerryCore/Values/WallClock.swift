#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ferry's one wall clock: every timestamp the client and the server record or decide on
/// (changeset times, ObjectIds' time prefix, when a file was last seen, log lines) is read from
/// a `WallClock`, the system's (`system`) unless one is passed in. Decisions take the time as an
/// argument (`UploadIntegration.integrate(now:)`, `BindRules.decide(now:)`), so a test or a
/// simulation owns time by passing its own clock or value. Durations and deadlines use the
/// monotonic `ContinuousClock`, not this.
public struct WallClock: Sendable {
    private let read: @Sendable () -> Int64

    /// A clock that reads `nanosecondsSinceEpoch` (a simulation's, a test's).
    public init(nanosecondsSinceEpoch: @escaping @Sendable () -> Int64) { read = nanosecondsSinceEpoch }

    /// The system's real-time clock (`CLOCK_REALTIME`).
    public static let system = WallClock {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
    }

    /// A clock stopped at `nanoseconds` since the epoch.
    public static func fixed(nanosecondsSinceEpoch nanoseconds: Int64) -> WallClock { WallClock { nanoseconds } }

    public func nanosecondsSinceEpoch() -> Int64 { read() }
    public func millisecondsSinceEpoch() -> Int64 { read() / 1_000_000 }
    public func secondsSinceEpoch() -> Int64 { read() / 1_000_000_000 }
    /// The seconds an ObjectId's time prefix holds (wrapping in 2106, as MongoDB's do).
    public func objectIdSeconds() -> UInt32 { UInt32(truncatingIfNeeded: secondsSinceEpoch()) }
}
