#if canImport(Glibc)
import Glibc
#endif

/// The wall clock, for ObjectIds generated through the C API.
enum FerryClock {
    static func seconds() -> UInt32 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt32(truncatingIfNeeded: ts.tv_sec)
    }
}
