import FerryCore

/// The completion of an open that downloads first: called exactly once, by whichever of the
/// download and the timeout claims it first.
final class OpenCompletion: @unchecked Sendable {
    private let lock = ThreadLock()
    private var claimed = false
    private let completion: @Sendable (Result<SyncSession, FerryError>) -> Void

    init(_ completion: @escaping @Sendable (Result<SyncSession, FerryError>) -> Void) { self.completion = completion }

    func claim() -> Bool {
        lock.withLock {
            defer { claimed = true }
            return !claimed
        }
    }

    func deliver(_ result: Result<SyncSession, FerryError>) { completion(result) }
}
