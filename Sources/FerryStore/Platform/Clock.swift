#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock time, the one place FerryStore reads it.
enum Clock {
    static func nanosecondsSinceEpoch() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec)
    }
}
