import CFerry
import FerryClient
import FerryCore

// Version and errors: the section "Version" and "Errors" of ferry.h.

nonisolated(unsafe) private let versionString = mallocString(SDKIdentity.version)

@c @implementation
public func ferry_version() -> UnsafePointer<CChar>! { UnsafePointer(versionString) }

@c @implementation
public func ferry_version_number() -> Int32 { 0 * 10000 + 1 * 100 + 0 }

@c @implementation
public func ferry_error_last() -> UnsafePointer<ferry_error_t>! { LastError.current() }

nonisolated(unsafe) private let errorTexts: [Int32: UnsafeMutablePointer<CChar>] = {
    var out: [Int32: UnsafeMutablePointer<CChar>] = [0: mallocString("ok")]
    for c in ErrorCode.allCases { out[c.rawValue] = mallocString(c.summary) }
    return out
}()
nonisolated(unsafe) private let unknownErrorText = mallocString("unknown error")

@c @implementation
public func ferry_strerror(_ code: Int32) -> UnsafePointer<CChar>! {
    UnsafePointer(errorTexts[code] ?? unknownErrorText)
}

@c @implementation
public func ferry_object_id_generate(_ out: UnsafeMutablePointer<ferry_value_t>!) -> Int32 {
    ferryCall {
        let out = try required(out, "out")
        let oid = ObjectId.generate(secondsSinceEpoch: WallClock.system.objectIdSeconds())
        var v = ferry_value_t()
        v.type = 7
        v.u.object_id = oid.bytes
        out.pointee = v
    }
}
