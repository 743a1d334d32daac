import FerryCore
import Foundation
import Logging

/// The recent rejected writes and sync errors, for the admin API (`GET /api/admin/v1/logs`).
/// Kept in memory (the last `capacity` entries); every entry also goes to the server log.
actor ServerEventLog {
    struct Entry: Sendable, Encodable {
        var time: String
        var kind: String
        var user_id: String?
        var message: String
    }

    private var entries: [Entry] = []
    private let capacity: Int

    init(capacity: Int = 1000) { self.capacity = capacity }

    /// The most of one entry's message kept (a hostile client's rejected query or reason may
    /// be up to a message in size; the log's memory and the logs endpoint stay small).
    static let maxMessageBytes = 2_048

    func record(kind: String, userId: String?, message: String) {
        entries.append(Entry(time: ISOTime.string(seconds: WallClock.system.secondsSinceEpoch()), kind: kind, user_id: userId.map { excerpt($0, limit: 256) },
                             message: excerpt(message, limit: Self.maxMessageBytes)))
        if entries.count > capacity { entries.removeFirst(entries.count - capacity) }
    }

    func recent(limit: Int) -> [Entry] { Array(entries.suffix(max(0, limit))) }
}
