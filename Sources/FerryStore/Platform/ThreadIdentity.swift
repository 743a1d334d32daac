#if canImport(Glibc)
import Glibc
#endif

/// The identity of the calling thread, to detect a wait that would deadlock.
func currentThreadID() -> UInt { UInt(bitPattern: Int(pthread_self())) }
