/// Where a write transaction's changes are on their way to the server. The order matters:
/// a wait for a state completes at that state or any later one, and a final state (`acknowledged`,
/// `rejected`) ends every wait.
public enum ReceiptState: Int32, Sendable, Comparable {
    /// Committed on this device; not sent yet (or sent before a restart and not answered).
    case local = 0
    /// Sent to the server; its answer has not come back yet.
    case uploaded = 1
    /// Durable on the server, and accepted: no compensating write names it.
    case acknowledged = 2
    /// The server reverted writes of the transaction (a compensating write, error 231).
    case rejected = 3

    public static func < (a: ReceiptState, b: ReceiptState) -> Bool { a.rawValue < b.rawValue }

    /// A state no later event changes.
    public var isFinal: Bool { self >= .acknowledged }
}

/// A write receipt's state before any rejection or client-reset alias is looked at (those are
/// in the file): decided from values (issue 25), by `Database.receiptStatus`.
public enum ReceiptRules {
    /// The state of receipt (local history version) `receipt`, when the file holds the
    /// server's acknowledgement through `acknowledged`, the sync agent has the answers complete
    /// through `settled` (nil: nothing settled this run, so the file's acknowledgement stands)
    /// and has sent the changesets through `uploaded`: acknowledged once its answer is complete
    /// (a compensating write would have made it rejected), uploaded once sent or acknowledged
    /// without its answer complete yet, else local.
    public static func state(of receipt: UInt64, acknowledged: UInt64, settled: UInt64?, uploaded: UInt64) -> ReceiptState {
        if receipt <= min(settled ?? acknowledged, acknowledged) { return .acknowledged }
        if receipt <= max(uploaded, acknowledged) { return .uploaded }
        return .local
    }
}
