import FerryCore

/// An upload as the connection's processor hands it to the hub: decoded, and sometimes
/// already merged (`SyncHub.prepareAhead`) while the connection's previous upload was still
/// being committed.
struct PreparedUpload: Sendable {
    let decoded: [UploadIntegration.Decoded]
    /// When the processor took it from the connection's queue (the acknowledgement metric).
    let arrived: ContinuousClock.Instant
    var ahead: Ahead?

    init(decoded: [UploadIntegration.Decoded], arrived: ContinuousClock.Instant) {
        self.decoded = decoded
        self.arrived = arrived
    }

    /// A merge made ahead of the upload's turn, and the session state it was made for.
    struct Ahead: Sendable {
        let premerged: PremergedUpload
        let clientFile: UInt64
        let subscriptionVersion: UInt64
        /// The changesets as merged, their bases capped at what the session had been sent.
        let changesets: [UploadIntegration.Decoded]

        /// Whether the merge was made for the session as it is now, with the changesets capped
        /// as they are now: the same client file and subscription set (so the same view), and
        /// the same bases.
        func matches(_ session: ServerSession, _ now: [UploadIntegration.Decoded]) -> Bool {
            guard session.clientFile == clientFile, session.subscriptionVersion == subscriptionVersion,
                  now.count == changesets.count else { return false }
            for (a, b) in zip(now, changesets) where a.upload.lastIntegratedServerVersion != b.upload.lastIntegratedServerVersion {
                return false
            }
            return true
        }
    }
}
