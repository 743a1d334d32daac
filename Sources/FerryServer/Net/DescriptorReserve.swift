#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A few file descriptors the server holds only to give them back when `accept` finds none
/// left, so that the rest of the process still has some while it waits. At the limit, opens
/// anywhere in the process fail, and not all fail cleanly: libdispatch's worker-pool monitor
/// reads `/proc/<thread>/stat` and traps when that open fails, which ended a server stuck at
/// its limit with SIGILL after a few minutes (issue 13). Accepting resumes only once the
/// reserve can be taken back with a descriptor to spare, so connections never eat it.
/// Confined to the listening socket's event loop.
final class DescriptorReserve {
    let size: Int
    private var held: [Int32] = []

    init(size: Int) {
        self.size = size
        _ = restore(sparing: 0)
    }

    var isHeld: Bool { held.count == size }

    /// Gives the descriptors back to the process.
    func release() {
        for fd in held { close(fd) }
        held = []
    }

    /// Takes the reserve back if `sparing` more descriptors are free beside it; false (and
    /// nothing held) if not.
    func restore(sparing: Int) -> Bool {
        guard !isHeld else { return true }
        release()
        var opened: [Int32] = []
        while opened.count < size + sparing {
            let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                for f in opened { close(f) }
                return false
            }
            opened.append(fd)
        }
        for f in opened[size...] { close(f) }
        held = Array(opened[..<size])
        return true
    }

    deinit { release() }
}
