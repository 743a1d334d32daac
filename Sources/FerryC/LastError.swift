import CFerry
import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// The thread-local last error behind `ferry_error_last()`. Each thread gets one malloc'd
/// `ferry_error_t` whose message is replaced on every failure; a pthread key destructor frees
/// both when the thread ends.
enum LastError {
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { raw in
            guard let raw else { return }
            let e = raw.assumingMemoryBound(to: ferry_error_t.self)
            free(UnsafeMutableRawPointer(mutating: e.pointee.message))
            free(raw)
        }
        return k
    }()

    /// Returned when the thread has had no error: code FERRY_OK.
    nonisolated(unsafe) static let none: UnsafeMutablePointer<ferry_error_t> = {
        let e = UnsafeMutablePointer<ferry_error_t>.allocate(capacity: 1)
        e.initialize(to: ferry_error_t(code: 0, message: UnsafePointer(mallocString("no error"))))
        return e
    }()

    static func set(_ code: Int32, _ message: String) {
        let raw = pthread_getspecific(key)
        let e: UnsafeMutablePointer<ferry_error_t>
        if let raw {
            e = raw.assumingMemoryBound(to: ferry_error_t.self)
            free(UnsafeMutableRawPointer(mutating: e.pointee.message))
        } else {
            e = malloc(MemoryLayout<ferry_error_t>.size)!.assumingMemoryBound(to: ferry_error_t.self)
            pthread_setspecific(key, e)
        }
        e.pointee.code = code
        e.pointee.message = UnsafePointer(mallocString(message))
    }

    static func current() -> UnsafePointer<ferry_error_t> {
        guard let raw = pthread_getspecific(key) else { return UnsafePointer(none) }
        return UnsafePointer(raw.assumingMemoryBound(to: ferry_error_t.self))
    }
}
