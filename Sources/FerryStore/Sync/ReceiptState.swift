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
