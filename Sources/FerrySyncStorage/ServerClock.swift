import Foundation

/// Wall-clock time for what the store records (last seen, refresh-token expiry, upload
/// stamps), in one place so every backend reads it alike.
public enum ServerClock {
    public static func secondsSinceEpoch() -> Int { Int(Date().timeIntervalSince1970) }
    public static func nanosecondsSinceEpoch() -> Int64 { Int64(Date().timeIntervalSince1970 * 1e9) }
}
