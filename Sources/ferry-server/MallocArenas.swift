#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Caps glibc's malloc arenas at one per core unless `MALLOC_ARENA_MAX` says otherwise. glibc
/// gives every thread that allocates under contention an arena of its own (up to 8 a core),
/// and the server's threads (NIO's, the cooperative pool, the blocking reads) each kept
/// memory the others could not reuse: the load tool's 10,000 idle devices held about 117 KB of
/// server memory each, 64 KB with the arenas capped.
enum MallocArenas {
    static func cap() {
        #if canImport(Glibc)
        guard ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil else { return }
        _ = glibcMallopt(mArenaMax, Int32(max(2, ProcessInfo.processInfo.activeProcessorCount)))
        #endif
    }

    #if canImport(Glibc)
    /// `M_ARENA_MAX` of <malloc.h>, which the Glibc module does not export.
    private static let mArenaMax: Int32 = -8
    #endif
}

#if canImport(Glibc)
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
#endif
