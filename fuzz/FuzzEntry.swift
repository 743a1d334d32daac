// The fuzz binary's entry point. Every target is compiled into one binary (FerryCore and the
// decoders outside it are compiled once, not once per target: on CI's 2 cores that build
// took most of the fuzzing step's time); FERRY_FUZZ_TARGET names the target a run feeds,
// and fuzz/run.sh sets it.
#if canImport(Glibc)
import Glibc
#endif

private let fuzzTargets: [String: (UnsafePointer<UInt8>, Int) -> CInt] = [
    "changelog": fuzzChangeLog,
    "changeset": fuzzChangeset,
    "extendedjson": fuzzExtendedJSON,
    "http": fuzzHTTP,
    "json": fuzzJSON,
    "protocol": fuzzProtocol,
    "query": fuzzQuery,
    "remotejson": fuzzRemoteJSON,
    "schema": fuzzSchema,
    "sqlcapture": fuzzSQLCapture,
    "stamped": fuzzStamped,
    "value": fuzzValue,
    "websocket": fuzzWebSocket,
]

/// Chosen once, at the first input: an unknown name ends the run before any input is fed.
private let selectedTarget: (UnsafePointer<UInt8>, Int) -> CInt = {
    let name = getenv("FERRY_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = fuzzTargets[name] else {
        fputs("FERRY_FUZZ_TARGET must name a target: \(fuzzTargets.keys.sorted().joined(separator: ", ")) (it is \"\(name)\")\n", stderr)
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    selectedTarget(data, size)
}
