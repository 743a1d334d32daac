import FerryCore

/// Which rule refused a write (`ferry_compensating_writes_total{reason=…}` and the admin API's
/// rejected writes). Told from the reason text FerryCore writes (`CompensatingWrite`), which
/// is the protocol's and never changes, rather than carried beside it through the upload path.
enum CompensatingWriteRule: String, Sendable, CaseIterable {
    /// The object is outside the session's subscriptions.
    case queryView = "query_view"
    /// The role's write filter refused it.
    case writeFilter = "write_filter"
    /// A create of a primary key another user's object holds.
    case keyTaken = "key_taken"

    init(_ write: CompensatingWrite) {
        if write.reason.contains("write filter") { self = .writeFilter }
        else if write.reason.contains("already in use") { self = .keyTaken }
        else { self = .queryView }
    }

    /// The role named by a write-filter refusal (`… in role "owner"`).
    static func role(of write: CompensatingWrite) -> String? {
        guard let range = write.reason.range(of: "in role \"") else { return nil }
        let rest = write.reason[range.upperBound...]
        guard let end = rest.lastIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}
