import FerryCore

/// A session's MARKs (issue 25: the session's state as values whose invariants are written
/// down): the request ids it hands out, what each one's answer completes, and what waits for a
/// connection to be sent on. Pure: the session sends what `issue` numbers and runs what
/// `answered` returns.
///
/// Invariants:
/// - request ids grow and are never reused, so the answer to a MARK of a lost connection
///   (requeued, then sent again under a new id) completes nothing;
/// - a wait is in exactly one place: sent (`pending`, by id) or waiting for a connection
///   (`unsent`, in the order it was asked);
/// - at most one receipt MARK is out at a time (`receiptMarkOut`), wherever it is.
package struct MarkBook: Sendable {
    /// What a MARK's answer completes.
    package enum Wait: Sendable {
        /// A host's wait for download (`waitForDownload`).
        case download(@Sendable (FerryError?) -> Void)
        /// The answers to the uploads through `through` are complete: their receipts settle
        /// (SyncSession+Receipts).
        case receipts(through: UInt64)
    }

    private var next: UInt64 = 1
    private var pending: [UInt64: Wait] = [:]
    private var unsent: [Wait] = []

    package init() {}

    /// Numbers `wait` for a MARK sent now.
    package mutating func issue(_ wait: Wait) -> UInt64 {
        let id = next
        next += 1
        pending[id] = wait
        return id
    }

    /// Keeps `wait` for the next connection (`takeUnsent`).
    package mutating func postpone(_ wait: Wait) { unsent.append(wait) }

    /// The wait a MARK's answer completes (nil: an answer to one requeued since, or unknown).
    package mutating func answered(_ request: UInt64) -> Wait? { pending.removeValue(forKey: request) }

    /// The connection is gone (or the server refused the file's identity, whose answers must
    /// complete nothing): the MARKs sent wait to be sent again, oldest first.
    package mutating func requeue() {
        unsent += pending.sorted { $0.key < $1.key }.map(\.value)
        pending.removeAll()
    }

    /// The waits to send now that the session is ready again, in order.
    package mutating func takeUnsent() -> [Wait] {
        defer { unsent.removeAll() }
        return unsent
    }

    /// Every wait, sent or not (the session stops: they fail).
    package mutating func takeAll() -> [Wait] {
        defer {
            pending.removeAll()
            unsent.removeAll()
        }
        return pending.sorted { $0.key < $1.key }.map(\.value) + unsent
    }

    /// Whether a receipt MARK is sent or waits to be.
    package var receiptMarkOut: Bool {
        pending.values.contains { if case .receipts = $0 { true } else { false } }
            || unsent.contains { if case .receipts = $0 { true } else { false } }
    }
}

/// The host's waits on a session (for upload, for a subscription set) and which of them a
/// state completes. Pure: the session reads the state (its acknowledgement, the stored set)
/// and runs the completions returned, so a wait is completed once and never lost.
package struct SessionWaits: Sendable {
    package typealias Done = @Sendable (FerryError?) -> Void
    private(set) var uploads: [(target: UInt64, done: Done)] = []
    private(set) var subscriptions: [(version: UInt64, done: Done)] = []

    package init() {}

    package mutating func waitForUpload(through target: UInt64, _ done: @escaping Done) { uploads.append((target, done)) }
    package mutating func waitForSubscriptions(version: UInt64, _ done: @escaping Done) { subscriptions.append((version, done)) }

    /// The upload waits that `acknowledged` completes, removed.
    package mutating func uploadsDone(acknowledged: UInt64) -> [Done] {
        var done: [Done] = []
        uploads.removeAll { w in
            guard acknowledged >= w.target else { return false }
            done.append(w.done)
            return true
        }
        return done
    }

    /// A client reset settled the changes before `acknowledged`; the recovered ones are
    /// uploaded again as one changeset, `latest`: a wait for any of them now waits for it.
    package mutating func resetSettled(acknowledged: UInt64, latest: UInt64) {
        guard latest > acknowledged else { return }
        uploads = uploads.map { ($0.target <= acknowledged ? latest : $0.target, $0.done) }
    }

    /// The subscription waits the stored set (its version and state) answers, removed, each
    /// with its outcome: complete (a later version also answers), or rejected.
    package mutating func subscriptionsDone(version: UInt64, state: SubscriptionSet.State, errorMessage: String) -> [(Done, FerryError?)] {
        var out: [(Done, FerryError?)] = []
        subscriptions.removeAll { w in
            if version > w.version || (version == w.version && state == .complete) {
                out.append((w.done, nil))
                return true
            }
            if version == w.version && state == .error {
                out.append((w.done, FerryError(.sync, "the subscription set was rejected: \(errorMessage)")))
                return true
            }
            return false
        }
        return out
    }

    /// Every subscription wait (the set cannot be read, or the session stops), removed.
    package mutating func takeSubscriptions() -> [Done] {
        defer { subscriptions.removeAll() }
        return subscriptions.map(\.done)
    }

    /// Every upload wait (the session stops), removed.
    package mutating func takeUploads() -> [Done] {
        defer { uploads.removeAll() }
        return uploads.map(\.done)
    }
}
