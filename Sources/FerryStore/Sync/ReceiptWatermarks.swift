import FerryCore

/// What the sync agent knows of its receipts beyond the file, shared by every handle of the
/// store: how far it has uploaded and how far the server's answers are settled. Kept in
/// memory on purpose: the file already says what is acknowledged, and writing these on every
/// upload would cost a durable transaction each. After a restart an upload the server never
/// answered reads `local` again until the session sends it again.
final class ReceiptWatermarks: Sendable {
    private struct State {
        /// The last history version sent to the server (0: none this run).
        var uploaded: UInt64 = 0
        /// The last history version whose answer is complete: acknowledged, and any compensating
        /// write for it received. nil until a sync session settles something: then the file's
        /// acknowledged version is taken as settled (a rejection that arrived is in the file).
        var settled: UInt64?
        /// Rejected receipts the host has read, marked in the file at the next rejection (they
        /// are dropped first when the rejections are over their bound).
        var read: Set<UInt64> = []
        /// Whether a host has asked about a receipt (read a state, or waited on one). Until then
        /// the sync session sends no MARK to settle the server's answers: each costs the server a
        /// storage read and a catch-up, and most hosts never read a receipt (measured with
        /// bench/load, 200 devices writing once a second: the server's CPU 17% without the MARKs,
        /// 22-28% with them (three runs)).
        var interested = false
        /// Told, on the asking thread, when the first question arrives: the session settles with a
        /// MARK what was acknowledged before it.
        var interestListener: (owner: ObjectIdentifier, listener: @Sendable () -> Void)?
    }

    private let state = LockedValue(State())

    func noteUploaded(through v: UInt64) { state.withLock { s in s.uploaded = max(s.uploaded, v) } }

    func noteSettled(through v: UInt64) { state.withLock { s in s.settled = max(s.settled ?? 0, v) } }

    /// A session starting from the file's acknowledged version: what it settles later moves on
    /// from there, and what it acknowledges before settling is not yet final.
    func resetSettled(to v: UInt64) {
        state.withLock { s in
            s.settled = v
            s.uploaded = v
        }
    }

    func snapshot() -> (uploaded: UInt64, settled: UInt64?) { state.withLock { s in (s.uploaded, s.settled) } }

    var isInterested: Bool { state.withLock { s in s.interested } }

    func noteInterest() {
        let listener = state.withLock { s -> (@Sendable () -> Void)? in
            guard !s.interested else { return nil }
            s.interested = true
            return s.interestListener?.listener
        }
        listener?()
    }

    /// nil removes `owner`'s listener (not another owner's).
    func setInterestListener(_ owner: ObjectIdentifier, _ listener: (@Sendable () -> Void)?) {
        state.withLock { s in
            if let listener {
                s.interestListener = (owner, listener)
            } else if s.interestListener?.owner == owner {
                s.interestListener = nil
            }
        }
    }

    func noteRead(_ v: UInt64) { state.withLock { s in _ = s.read.insert(v) } }

    func takeRead() -> [UInt64] {
        state.withLock { s in
            defer { s.read.removeAll() }
            return Array(s.read)
        }
    }
}
