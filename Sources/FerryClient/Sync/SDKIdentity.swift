import FerryCore

/// What the client tells the server about itself on the sync WebSocket (`X-Ferry-SDK`), so an
/// operator sees which SDK and platform each device runs (the admin API's device list).
public enum SDKIdentity {
    /// The library's version: `ferry_version()` returns it; the same as `FERRY_VERSION_STRING`
    /// in include/ferry.h.
    public static let version = "0.1.0"

    static var platform: String {
        #if os(Linux)
        let os = "linux"
        #elseif os(macOS)
        let os = "macos"
        #elseif os(Windows)
        let os = "windows"
        #else
        let os = "unknown"
        #endif
        #if arch(x86_64)
        let arch = "x86_64"
        #elseif arch(arm64)
        let arch = "arm64"
        #else
        let arch = "other"
        #endif
        return "\(os)-\(arch)"
    }

    /// `ferry/0.1.0 linux-x86_64`.
    static var header: (String, String) { ("X-Ferry-SDK", "ferry/\(version) \(platform)") }

    /// The optional server messages this client understands (docs/protocol.md): a server
    /// sends WRITE_RULES only to a client that lists `write-rules`, so older clients, whose
    /// decoder refuses unknown message types, never get one; older servers ignore the header.
    static var featuresHeader: (String, String) { (ProtocolFeatures.header, ProtocolFeatures.writeRules) }
}
