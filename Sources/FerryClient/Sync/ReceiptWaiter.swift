import FerryCore
import FerryStore

/// One wait for a write receipt to reach a state (SyncSession.waitForReceipt).
struct ReceiptWaiter {
    let receipt: UInt64
    let target: ReceiptState
    let done: @Sendable (Result<ReceiptStatus, FerryError>) -> Void

    /// Whether `status` ends this wait: the target or a later state, or a final state (a wait
    /// for `rejected` ends when the receipt is acknowledged: it will never be rejected then).
    func isMet(by status: ReceiptStatus) -> Bool { status.state >= target || status.state.isFinal }
}
