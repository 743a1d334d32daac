/// A receipt's state, with the compensating writes that concern its transaction when the
/// server rejected it (the objects it wrote that the server reverted, with the reasons).
public struct ReceiptStatus: Sendable, Equatable {
    public var receipt: UInt64
    public var state: ReceiptState
    public var compensatingWrites: [CompensatingWrite]

    public init(receipt: UInt64, state: ReceiptState, compensatingWrites: [CompensatingWrite] = []) {
        self.receipt = receipt
        self.state = state
        self.compensatingWrites = compensatingWrites
    }
}
