import FerryCore
import Foundation

/// What a client's clock may decide (docs/protocol.md, "Merge"). A changeset's timestamp orders
/// it against concurrent writes (last writer wins), but the device's clock is not to be
/// trusted: a broken clock or a hostile device of the same user could stamp a changeset years
/// ahead and outrank every concurrent edit for ever. A change cannot have been made after the
/// server received it, so the server counts a timestamp ahead of its own clock as its own clock
/// plus a small allowance. The server stores the stamps it decided and every replica takes its
/// state, so the merge stays deterministic.
enum UploadClock {
    /// How far ahead of the server's clock a changeset's timestamp may count: one second, in
    /// nanoseconds. It keeps the order of devices whose clocks run slightly ahead of the
    /// server's (NTP keeps them within milliseconds); a clock further ahead outranks
    /// concurrent writes by at most this much. A write made after seeing another one wins
    /// over it whatever the clocks say (`Stamp.supersedes`).
    static let allowedSkew: Int64 = 1_000_000_000

    /// The stamp of a changeset from `fileIdent` with the client's `timestamp`, merged when the
    /// server's clock reads `now` (nanoseconds since the Unix epoch).
    static func stamp(_ timestamp: Int64, fileIdent: UInt64, now: Int64 = WallClock.system.nanosecondsSinceEpoch()) -> Stamp {
        Stamp(timestamp: min(timestamp, now &+ allowedSkew), fileIdent: fileIdent)
    }

}
