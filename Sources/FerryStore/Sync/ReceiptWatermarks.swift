import FerryCore
/// What the sync agent knows of its receipts beyond the file, shared by every handle of the
/// store: how far it has uploaded and how far the server's answers are settled. Kept in
/// memory on purpose: the file already says what is acknowledged, and writing these on every
/// upload would cost a durable transaction each. After a restart an upload the server never
/// answered reads `local` again until the session sends it again.
final class ReceiptWatermarks: @unchecked Sendable {
    private let lock = ThreadLock()
    /// The last history version sent to the server (0: none this run).
    private var uploaded: UInt64 = 0
    /// The last history version whose answer is complete: acknowledged, and any compensating
    /// write for it received. nil until a sync session settles something: then the file's
    /// acknowledged version is taken as settled (a rejection that arrived is in the file).
    private var settled: UInt64?
    /// Rejected receipts the host has read, marked in the file at the next rejection (they
    /// are dropped first when the rejections are over their bound).
    private var read: Set<UInt64> = []
    /// Whether a host has asked about a receipt (read a state, or waited on one). Until then
    /// the sync session sends no MARK to settle the server's answers: each costs the server a
    /// storage read and a catch-up, and most hosts never read a receipt (measured with
    /// bench/load, 200 devices writing once a second: the server's CPU 17% without the MARKs,
    /// 22-28% with them (three runs)).
    private var interested = false
    /// Told, on the asking thread, when the first question arrives: the session settles with a
    /// MARK what was acknowledged before it.
    private var interestListener: (owner: ObjectIdentifier, listener: @Sendable () -> Void)?

    func noteUploaded(through v: UInt64) { lock.withLock { uploaded = max(uploaded, v) } }

    func noteSettled(through v: UInt64) { lock.withLock { settled = max(settled ?? 0, v) } }

    /// A session starting from the file's acknowledged version: what it settles later moves on
    /// from there, and what it acknowledges before settling is not yet final.
    func resetSettled(to v: UInt64) {
        lock.withLock {
            settled = v
            uploaded = v
        }
    }

    func snapshot() -> (uploaded: UInt64, settled: UInt64?) { lock.withLock { (uploaded, settled) } }

    var isInterested: Bool { lock.withLock { interested } }

    func noteInterest() {
        let listener = lock.withLock { () -> (@Sendable () -> Void)? in
            guard !interested else { return nil }
            interested = true
            return interestListener?.listener
        }
        listener?()
    }

    /// nil removes `owner`'s listener (not another owner's).
    func setInterestListener(_ owner: ObjectIdentifier, _ listener: (@Sendable () -> Void)?) {
        lock.withLock {
            if let listener {
                interestListener = (owner, listener)
            } else if interestListener?.owner == owner {
                interestListener = nil
            }
        }
    }

    func noteRead(_ v: UInt64) { lock.withLock { _ = read.insert(v) } }

    func takeRead() -> [UInt64] {
        lock.withLock {
            defer { read.removeAll() }
            return Array(read)
        }
    }
}
