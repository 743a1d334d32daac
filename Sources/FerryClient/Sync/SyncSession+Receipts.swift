import FerryCore
import FerryStore

/// Write receipts on the session's side: it moves receipts to `uploaded` when it sends their
/// changesets, settles them (`acknowledged`) when the MARK after the upload returns, records
/// compensating writes against them (`rejected`), and completes the host's waits.
extension SyncSession {
    /// Calls `done` once, on the loop thread, when the receipt reaches `target` or a later
    /// state, or any final state (`acknowledged`, `rejected`); at once when it already has. A
    /// session that stops first (closed, fatal error) fails the wait, unless the receipt was
    /// already there. Waits survive reconnects; after a restart, wait again on the new session.
    /// Throws (and never calls `done`) for a receipt the database never gave.
    public func waitForReceipt(_ receipt: UInt64, reaching target: ReceiptState,
                               _ done: @escaping @Sendable (Result<ReceiptStatus, FerryError>) -> Void) throws {
        _ = try database.receiptStatus(receipt)
        app.loop.post { [self] in
            let waiter = ReceiptWaiter(receipt: receipt, target: target, done: done)
            if let status = try? database.receiptStatus(receipt), waiter.isMet(by: status) { return done(.success(status)) }
            if let f = fatal { return done(.failure(f.asFerryError)) }
            if closed { return done(.failure(FerryError(.closed, "the sync session is closed"))) }
            receiptWaiters.append(waiter)
        }
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

    /// Loop thread: a compensating write (error 231) answers the upload acknowledged last.
    func rejectReceipts(_ writes: [CompensatingWrite]) {
        guard let window = lastAcknowledgement else { return }
        do { try database.recordRejection(writes, after: window.after, through: window.through) } catch {
            app.log(.error, "cannot record the rejected write receipts of \(path): \(error)")
        }
        checkReceiptWaiters()
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
