import FerryCore

/// A session's byte counters per direction and the progress notifiers registered on them.
/// Counters change on the loop thread only (the session reports bytes committed, acknowledged
/// and downloaded); registration and cancellation come from any thread; callbacks run on the
/// loop thread.
///
/// A unit of work starts when transferable bytes exceed transferred bytes and ends when they
/// meet. An estimate is (transferred - start) / (transferable - start) for the unit's start,
/// held at its highest value so far: work added during a unit (a new local commit while an
/// upload is under way) stalls the estimate instead of pulling it back.
final class ProgressNotifiers: @unchecked Sendable {
    private struct Counters {
        var transferred: UInt64 = 0
        var transferable: UInt64 = 0
        /// Transferred bytes when the current unit of work began.
        var unitStart: UInt64 = 0
        /// Downloads only: the session expects figures from the server (a subscription set
        /// or a catch-up is outstanding), so "nothing to transfer" is not known yet.
        var awaitingFigures = false
        var idle: Bool { transferable <= transferred && !awaitingFigures }
    }

    private struct Notifier {
        let direction: ProgressDirection
        let mode: ProgressMode
        let callback: @Sendable (SyncProgress) -> Void
        /// Current-work notifiers: the unit they cover, fixed at the first evaluation.
        var start: UInt64?
        var target: UInt64?
        /// The highest estimate reported in the current unit, and the last report.
        var best: Double = 0
        var last: SyncProgress?
    }

    private let lock = ThreadLock()
    private var notifiers: [UInt64: Notifier] = [:]
    private var nextId: UInt64 = 1
    private var upload = Counters()
    private var download = Counters()
    private let post: (@escaping @Sendable () -> Void) -> Bool

    /// `post` runs a closure on the loop thread (false: the loop has stopped).
    init(post: @escaping (@escaping @Sendable () -> Void) -> Bool) { self.post = post }

    // MARK: registration (any thread)

    func register(_ direction: ProgressDirection, _ mode: ProgressMode, _ callback: @escaping @Sendable (SyncProgress) -> Void) -> ProgressToken {
        let id = lock.withLock { () -> UInt64 in
            defer { nextId += 1 }
            notifiers[nextId] = Notifier(direction: direction, mode: mode, callback: callback)
            return nextId
        }
        // The first report comes from the loop thread, after whatever the loop has queued.
        _ = post { [self] in evaluate(only: id) }
        return ProgressToken(post: post) { [weak self] in self?.remove(id) }
    }

    private func remove(_ id: UInt64) { _ = lock.withLock { notifiers.removeValue(forKey: id) } }

    // MARK: counters (loop thread)

    /// Local changesets of `bytes` were committed (they are now to be uploaded).
    func uploadable(adding bytes: UInt64) {
        guard bytes > 0 else { return }
        lock.withLock { Self.grow(&upload, by: bytes) }
        evaluate()
    }

    /// The server acknowledged `bytes` more of the local changesets.
    func uploaded(adding bytes: UInt64) {
        guard bytes > 0 else { return }
        lock.withLock { upload.transferred = upload.transferred.addingSaturated(bytes) }
        evaluate()
    }

    /// The session expects a download (it sent a subscription set or is catching up).
    func expectDownload() {
        lock.withLock { download.awaitingFigures = true }
    }

    /// A DOWNLOAD of `bytes` arrived with `remaining` bytes still to come in its batch;
    /// `settled` when nothing more is expected (last of its batch, no newer query pending).
    func downloaded(bytes: UInt64, remaining: UInt64, settled: Bool) {
        lock.withLock {
            if download.transferable <= download.transferred { download.unitStart = download.transferred }
            // `remaining` is the server's figure: saturating, never trapping (issue 22, point 2).
            download.transferred = download.transferred.addingSaturated(bytes)
            download.transferable = max(download.transferable, download.transferred.addingSaturated(remaining))
            download.awaitingFigures = !settled
            if settled && remaining == 0 { download.transferable = download.transferred }
        }
        evaluate()
    }

    private static func grow(_ c: inout Counters, by bytes: UInt64) {
        if c.transferable <= c.transferred { c.unitStart = c.transferred }
        c.transferable = c.transferable.addingSaturated(bytes)
    }

    // MARK: delivery (loop thread)

    /// Computes every notifier's report (or one's), delivers the changed ones, and drops the
    /// current-work notifiers that completed.
    private func evaluate(only: UInt64? = nil) {
        let due: [(@Sendable (SyncProgress) -> Void, SyncProgress)] = lock.withLock {
            var out: [(@Sendable (SyncProgress) -> Void, SyncProgress)] = []
            for id in only.map({ [$0] }) ?? Array(notifiers.keys).sorted() {
                guard var n = notifiers[id] else { continue }
                let c = n.direction == .upload ? upload : download
                let (report, finished) = Self.report(&n, c)
                if let report, report != n.last {
                    n.last = report
                    out.append((n.callback, report))
                }
                notifiers[id] = finished ? nil : n
            }
            return out
        }
        for (callback, progress) in due { callback(progress) }
    }

    /// The report of one notifier on counters `c` (nil: nothing to say yet) and whether a
    /// current-work notifier is done.
    private static func report(_ n: inout Notifier, _ c: Counters) -> (SyncProgress?, Bool) {
        switch n.mode {
        case .reportIndefinitely:
            if c.idle {
                n.best = 0
                return (SyncProgress(progressEstimate: 1.0, transferredBytes: c.transferred, transferableBytes: max(c.transferable, c.transferred)), false)
            }
            if c.transferable <= c.transferred { return (nil, false) } // awaiting the server's figures
            let e = max(n.best, fraction(c.transferred.subtractingSaturated(c.unitStart), c.transferable.subtractingSaturated(c.unitStart)))
            n.best = e
            return (SyncProgress(progressEstimate: e, transferredBytes: c.transferred, transferableBytes: c.transferable), false)
        case .forCurrentlyOutstandingWork:
            if n.target == nil {
                if c.idle {
                    return (SyncProgress(progressEstimate: 1.0, transferredBytes: c.transferred, transferableBytes: c.transferred), true)
                }
                if c.transferable <= c.transferred { return (nil, false) }
                n.start = c.unitStart
                n.target = c.transferable
            }
            let start = n.start ?? 0, target = n.target ?? 0
            if c.transferred >= target {
                return (SyncProgress(progressEstimate: 1.0, transferredBytes: target, transferableBytes: target), true)
            }
            let e = max(n.best, fraction(c.transferred.subtractingSaturated(start), target.subtractingSaturated(start)))
            n.best = e
            return (SyncProgress(progressEstimate: e, transferredBytes: c.transferred, transferableBytes: target), false)
        }
    }

    /// done / total below 1.0 while work is left (rounding must not report completion early).
    private static func fraction(_ done: UInt64, _ total: UInt64) -> Double {
        guard total > 0 else { return 1.0 }
        return min(Double(done) / Double(total), 0.999_999)
    }
}
