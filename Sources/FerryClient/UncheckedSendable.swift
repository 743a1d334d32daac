/// A value handed between closures that all run on the loop thread, which Swift cannot see.
struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
