/// An instant: seconds since the Unix epoch plus nanoseconds in `0..<1_000_000_000`, so that
/// ordering the pair lexicographically orders the instants.
public struct Timestamp: Hashable, Comparable, Sendable {
    public let seconds: Int64
    public let nanoseconds: Int32

    /// Fails for nanoseconds outside `0..<1_000_000_000`.
    public init(seconds: Int64, nanoseconds: Int32) throws {
        guard nanoseconds >= 0 && nanoseconds < 1_000_000_000 else {
            throw FerryError(.invalidArgument, "timestamp nanoseconds must be in 0...999999999, got \(nanoseconds)")
        }
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public static let epoch = Timestamp(uncheckedSeconds: 0, nanoseconds: 0)

    /// For values known to be in range.
    private init(uncheckedSeconds: Int64, nanoseconds: Int32) {
        self.seconds = uncheckedSeconds
        self.nanoseconds = nanoseconds
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool {
        a.seconds != b.seconds ? a.seconds < b.seconds : a.nanoseconds < b.nanoseconds
    }
}
