/// Which way the bytes of a progress notification go (the seeds' `ProgressDirection`).
public enum ProgressDirection: Int32, Sendable { case upload = 0, download = 1 }

/// How long a progress notifier reports (the seeds' `ProgressMode`): every unit of work for as
/// long as it is registered, or only the work outstanding when it was registered, after which
/// it reports 1.0 once and stops.
public enum ProgressMode: Int32, Sendable { case reportIndefinitely = 0, forCurrentlyOutstandingWork = 1 }

/// One progress report. Within one unit of work `progressEstimate` never goes down, stays in
/// [0.0, 1.0] and is exactly 1.0 when the work is done. Bytes are changeset bytes: for uploads
/// the local changes acknowledged by the server out of those committed; for downloads what
/// arrived out of what the server said it was sending.
public struct SyncProgress: Sendable, Equatable {
    public var progressEstimate: Double
    public var transferredBytes: UInt64
    public var transferableBytes: UInt64

    public init(progressEstimate: Double, transferredBytes: UInt64, transferableBytes: UInt64) {
        self.progressEstimate = progressEstimate
        self.transferredBytes = transferredBytes
        self.transferableBytes = transferableBytes
    }

    public var isTransferComplete: Bool { progressEstimate >= 1.0 }
}
