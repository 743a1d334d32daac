import CFerry
import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// The catch-all around every export: a `FerryError` becomes its code plus the thread's last
/// error; anything else is reported as an internal error. Swift errors never cross into C.
@inline(__always)
func ferryCall(_ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return 0
    } catch let e as FerryError {
        LastError.set(e.code.rawValue, e.message)
        return e.code.rawValue
    } catch {
        LastError.set(ErrorCode.internal.rawValue, "unexpected error: \(error)")
        return ErrorCode.internal.rawValue
    }
}

/// Reads a required out-pointer or fails with a message naming the parameter.
@inline(__always)
func required<T>(_ p: UnsafeMutablePointer<T>?, _ name: String) throws -> UnsafeMutablePointer<T> {
    guard let p else { throw FerryError(.invalidArgument, "\(name) must not be NULL") }
    return p
}

@inline(__always)
func required<T>(_ p: UnsafePointer<T>?, _ name: String) throws -> UnsafePointer<T> {
    guard let p else { throw FerryError(.invalidArgument, "\(name) must not be NULL") }
    return p
}

/// A host string: not NULL, valid UTF-8.
func hostString(_ p: UnsafePointer<CChar>?, _ name: String) throws -> String {
    guard let p else { throw FerryError(.invalidArgument, "\(name) must not be NULL") }
    guard let s = String(validatingCString: p) else { throw FerryError(.invalidArgument, "\(name) is not valid UTF-8") }
    return s
}

/// A NUL-terminated copy of a string in malloc'd memory, for strings Ferry lends out.
func mallocString(_ s: String) -> UnsafeMutablePointer<CChar> {
    var s = s
    return s.withUTF8 { buf in
        let p = malloc(buf.count + 1)!.assumingMemoryBound(to: CChar.self)
        if let base = buf.baseAddress { memcpy(p, base, buf.count) }
        p[buf.count] = 0
        return p
    }
}
