/// A value handed between closures that all run on one thread (the client's loop thread),
/// which Swift cannot see: the one place Ferry's modules say so.
package struct UncheckedSendable<T>: @unchecked Sendable {
    package let value: T
    package init(_ value: T) { self.value = value }
}
