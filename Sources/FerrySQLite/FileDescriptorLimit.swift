#if canImport(Glibc)
import Glibc
#endif

/// Says so when a failure is the process (or the system) running out of file descriptors,
/// which SQLite reports only as "unable to open database file". Each open database holds
/// about six (three SQLite connections with the file and its WAL each, one shared-memory
/// file), so a host that opens a few hundred hits a limit of 1,024 without any other fault.
package enum FileDescriptorLimit {
    /// The explanation for `error` (an errno value), or nil when it is not about descriptors.
    package static func explanation(errno error: Int32) -> String? {
        switch error {
        case EMFILE:
            var limit = rlimit()
            let soft = getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 && limit.rlim_cur != rlim_t.max
                ? " of \(limit.rlim_cur)" : ""
            return "the process ran out of file descriptors (all\(soft) allowed by RLIMIT_NOFILE are open; "
                + "each open database holds about 6): close databases or raise the limit (ulimit -n)"
        case ENFILE:
            return "the system ran out of file descriptors (its open-file table is full)"
        default:
            return nil
        }
    }
}
