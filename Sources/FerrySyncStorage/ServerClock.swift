import Foundation

/// Wall-clock time for what the store records (when a client file was last seen), in one
/// place so every backend reads it alike.
public enum ServerClock {
    public static func secondsSinceEpoch() -> Int { Int(Date().timeIntervalSince1970) }
}
