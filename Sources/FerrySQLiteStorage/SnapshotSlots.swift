import FerryCore

/// How many snapshots of the store are open at once, at most; the rest wait their turn in
/// order. Each snapshot is a connection of its own (descriptors for the file and its WAL, and
/// a page cache): 10,000 devices subscribing at once opened enough of them to run the process
/// out of descriptors (the load tool's idle run: 85 devices were refused with 503), and a
/// streamed bootstrap keeps its snapshot while its client reads.
final class SnapshotSlots: @unchecked Sendable {
    private let lock = ThreadLock()
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = max(1, count) }

    /// Runs `body` holding a slot.
    func withSlot<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    private func release() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiting.isEmpty {
                free += 1
                return nil
            }
            return waiting.removeFirst()
        }
        next?.resume()
    }
}
