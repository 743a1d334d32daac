/// How a device integrates one download, decided from values (issue 25: the rules apart from
/// the SQL that carries them out). FerryStore's `Database.integrate` reads the file's sync
/// state, asks `DownloadPlan.make`, writes the download's objects, applies again the local
/// changes `rebase` keeps, captures the objects the download changed under the device's
/// recent writes (`RevertCapture`), and stores what the plan says, all in one transaction.
///
/// The rules:
/// - the acknowledgement the file holds never goes back;
/// - local changes the server has not acknowledged are laid again over the downloaded objects
///   they touch, in their order (the rebase); with none, nothing is tracked;
/// - when nothing needs the download as instructions (no local change to lay again, no write
///   to capture, no observer) its objects go from the decoder straight into rows;
/// - the device's writes after the session's capture floor are read to capture what the
///   download changes under them (SPEC F-NOLOSS), but past `captureBytes` of history (a bulk
///   import) only those the server had not acknowledged before the download;
/// - a download that moves the acknowledgement completes the answers through the one before
///   it, unless the session knows some are still to come (`answeredThrough`);
/// - a download that completes a server version records it, with the local version it
///   is the base of, and only the bases of unacknowledged changesets are kept.
public struct DownloadPlan: Equatable, Sendable {
    /// The acknowledgement the file holds after the download.
    public let acknowledged: UInt64
    /// Local changes after this version are laid again over what the download touches
    /// (nil: there are none).
    public let rebaseAfter: UInt64?
    /// The objects go from the decoder into rows, with no instruction per object.
    public let rowsFromDecoder: Bool
    /// The device's writes after this version are read to capture reverts (nil: none are).
    public let captureAfter: UInt64?
    /// The version the capture narrows to when the history after `captureAfter` is larger
    /// than `captureBytes` (nil: it never narrows).
    public let narrowCaptureTo: UInt64?
    /// `SyncMetadata.answered` to store (nil: unchanged).
    public let answered: UInt64?
    /// The server version the file has integrated after it (nil: not moved).
    public let serverVersion: UInt64?

    /// How many bytes of local history a capture reads at most beyond what the server had not
    /// acknowledged.
    public static let captureBytes: Int64 = 8 << 20

    /// - Parameters:
    ///   - stored: the acknowledgement the file holds; `acknowledged`: the download's.
    ///   - latestLocal: the file's last local version.
    ///   - encoded: the download is the server's changesets, not instructions already decoded.
    ///   - observed: the file has observers, which need the instructions.
    ///   - captureFloor: the session's capture floor (nil: capture nothing).
    ///   - answeredThrough: the session's version through which answers are complete, when less
    ///     than the acknowledgement before this one.
    ///   - serverVersion: the download's server version, which it completes if `completesVersion`.
    public static func make(stored: UInt64, acknowledged: UInt64, latestLocal: UInt64, encoded: Bool, observed: Bool,
                            captureFloor: UInt64?, answeredThrough: UInt64?, serverVersion: UInt64, completesVersion: Bool) -> DownloadPlan {
        let ack = max(stored, acknowledged)
        let hasLocal = latestLocal > ack
        let capture = captureFloor.flatMap { latestLocal > $0 ? $0 : nil }
        return DownloadPlan(acknowledged: ack, rebaseAfter: hasLocal ? ack : nil,
                            rowsFromDecoder: encoded && !hasLocal && !observed && capture == nil,
                            captureAfter: capture, narrowCaptureTo: capture.flatMap { $0 < stored ? stored : nil },
                            answered: ack > stored ? min(stored, answeredThrough ?? stored) : nil,
                            serverVersion: completesVersion ? serverVersion : nil)
    }

    /// Where the capture starts, given the size of the history after `captureAfter`.
    public func captureStart(historyBytes: Int64) -> UInt64? {
        guard let captureAfter else { return nil }
        if let narrowCaptureTo, historyBytes > Self.captureBytes { return narrowCaptureTo }
        return captureAfter
    }

    /// The rebase: the local changes (oldest first) to lay again over the download, those of
    /// the objects it touched. The store skips a create whose object the download left in
    /// place and drops a change that no longer fits (its list shrank, its object is gone):
    /// the server decides their fate when they are uploaded.
    public static func rebase(_ local: [Instruction], touched: Set<ObjectKey>) -> [Instruction] {
        guard !touched.isEmpty else { return [] }
        return local.filter { touched.contains(ObjectKey(table: $0.table, key: $0.key)) }
    }
}
