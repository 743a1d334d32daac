import Foundation

/// The admin API's times: ISO 8601 in UTC with milliseconds (`2026-11-26T13:39:51.123Z`);
/// query parameters are taken with or without the fraction.
enum ISOTime {
    static func string(milliseconds: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }

    /// Whole seconds, without the fraction (`2026-11-26T13:39:51Z`): the event log's times.
    static func string(seconds: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime]
        return f.string(from: Date(timeIntervalSince1970: Double(seconds)))
    }

    static func milliseconds(_ text: String) -> Int64? {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: text) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }
}
