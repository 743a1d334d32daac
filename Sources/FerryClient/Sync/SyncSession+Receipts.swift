import FerryCore
import FerryStore

/// Write receipts on the session's side: it moves receipts to `uploaded` when it sends their
/// changesets, settles them (`acknowledged`) once the server's answer to their upload is
/// complete, records compensating writes against them (`rejected`), and completes the host's
/// waits.
///
/// When an answer is complete, without asking the server each time: the server handles a
/// connection's messages in order and answers an UPLOAD with a DOWNLOAD that acknowledges it,
/// then, if it reverted writes, one ERROR 231, before it reads the next message. So
/// - a 231 completes the answer to the upload acknowledged just before it;
/// - an acknowledgement that moves from A to B completes the answers through A (any 231 for
///   them came before it);
/// - only the last upload of a burst stays open: a MARK settles it, sent once acknowledgements
///   stop coming for `receiptMarkDelayMs`, or at once when the host waits on such a receipt.
/// A host writing without pause so costs no MARK at all; an earlier version sent one per round
/// trip, which the server answers with a storage read and a catch-up, and that slowed the
/// whole test suite by half. And a host that never asks about a receipt (most do not) costs
/// none: MARKs start with the first question (`Database.receiptsWanted`), which settles at
/// once what was acknowledged before it.
extension SyncSession {
    /// Calls `done` once, on the loop thread, when the receipt reaches `target` or a later
    /// state, or any final state (`acknowledged`, `rejected`); at once when it already has. A
    /// session that stops first (closed, fatal error) fails the wait, unless the receipt was
    /// already there. Waits survive reconnects; after a restart, wait again on the new session.
    /// Throws (and never calls `done`) for a receipt the database never gave.
    public func waitForReceipt(_ receipt: UInt64, reaching target: ReceiptState,
                               _ done: @escaping @Sendable (Result<ReceiptStatus, FerryError>) -> Void) throws {
        _ = try database.receiptStatus(receipt)
        let posted = app.loop.post { [self] in
            let waiter = ReceiptWaiter(receipt: receipt, target: target, done: done)
            do {
                let status = try database.receiptStatus(receipt)
                if waiter.isMet(by: status) { return done(.success(status)) }
            } catch {
                return done(.failure(error as? FerryError ?? FerryError(.io, "cannot read receipt \(receipt): \(error)")))
            }
            if let f = fatal { return done(.failure(f.asFerryError)) }
            if closed { return done(.failure(FerryError(.closed, "the sync session is closed"))) }
            receiptWaiters.append(waiter)
            // Acknowledged and waiting for its answer to complete: ask now, not after the pause.
            if receipt <= acknowledged, hasUnsettledReceipts { sendReceiptMark() }
        }
        // The loop stops when the app closes: the wait would otherwise never be answered.
        if !posted { done(.failure(FerryError(.closed, "the app is closed"))) }
    }

    /// `waitForReceipt` for async code.
    public func receipt(_ receipt: UInt64, reaching target: ReceiptState) async throws -> ReceiptStatus {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<ReceiptStatus, Error>) in
            do {
                try waitForReceipt(receipt, reaching: target) { c.resume(with: $0.mapError { $0 as Error }) }
            } catch {
                c.resume(throwing: error)
            }
        }
    }

    /// Loop thread: the answers to uploads through `target` are all in.
    func settleReceipts(through target: UInt64) {
        database.noteReceiptsSettled(through: min(target, acknowledged))
        checkReceiptWaiters()
    }

    /// Loop thread: a compensating write (error 231) answers the upload acknowledged last
    /// (`span`, nil when none was), and completes that answer.
    func rejectReceipts(_ writes: [CompensatingWrite], answering span: UploadWindow.Span?) {
        guard let span else { return }
        do { try database.recordRejection(writes, after: span.after, through: span.through) } catch {
            app.log(.error, "cannot record the rejected write receipts of \(path): \(error)")
        }
        settleReceipts(through: span.through)
    }

    /// How long acknowledgements must pause before a MARK settles the last upload's receipts.
    static let receiptMarkDelayMs: UInt64 = 50

    /// Loop thread: a download moved the acknowledgement from `previous`: the answers through
    /// `previous` are complete; the rest waits for the next acknowledgement or a MARK.
    func acknowledgementMoved(from previous: UInt64) {
        settleReceipts(through: previous)
        if hasUnsettledReceipts { scheduleReceiptMark() }
    }

    /// Loop thread: a host asked about a receipt for the first time. What was acknowledged
    /// before then was left unsettled (no MARK while nobody asked): settle it now.
    func receiptInterestArrived() {
        guard !closed, fatal == nil, hasUnsettledReceipts else { return }
        sendReceiptMark()
    }

    /// Whether acknowledged receipts wait for their answer to be complete.
    var hasUnsettledReceipts: Bool {
        (database.receiptsSettled ?? 0) < acknowledged
    }

    /// A MARK once acknowledgements pause; each new acknowledgement pushes it back. At once
    /// when the host waits on a receipt the MARK would settle.
    func scheduleReceiptMark() {
        guard !closed, fatal == nil else { return }
        let settled = database.receiptsSettled ?? 0
        if receiptWaiters.contains(where: { $0.receipt > settled && $0.receipt <= acknowledged }) { return sendReceiptMark() }
        // Nobody reads this file's receipts: nothing to settle them for.
        guard database.receiptsWanted else { return }
        // A timer handle lives only while it is scheduled: it closes itself when it fires. A
        // handle left open would outlive the shared loop once every app closed (a stopped
        // timer does not keep `uv_run` going), and closing it later corrupts the next loop.
        if receiptTimer == nil { receiptTimer = LoopTimer(loop: app.loop) }
        receiptTimer?.schedule(afterMilliseconds: Self.receiptMarkDelayMs) { [weak self] in
            guard let self else { return }
            self.receiptTimer?.invalidate()
            self.receiptTimer = nil
            guard !self.closed, self.fatal == nil, self.hasUnsettledReceipts else { return }
            self.sendReceiptMark()
        }
    }

    /// Loop thread: completes the waits whose receipts reached their state.
    func checkReceiptWaiters() {
        guard !receiptWaiters.isEmpty else { return }
        var finished: [(ReceiptWaiter, Result<ReceiptStatus, FerryError>)] = []
        receiptWaiters.removeAll { w in
            do {
                let status = try database.receiptStatus(w.receipt)
                guard w.isMet(by: status) else { return false }
                finished.append((w, .success(status)))
            } catch {
                finished.append((w, .failure(error as? FerryError ?? FerryError(.internal, "\(error)"))))
            }
            return true
        }
        for (w, result) in finished { w.done(result) }
    }
}
