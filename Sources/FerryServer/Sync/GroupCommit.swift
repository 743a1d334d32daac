import FerryCore
import FerrySyncStorage

/// Group commit: uploads that arrive while a storage transaction is running wait for it, then
/// go together into the next one, each at its own version, with one commit (one fsync on
/// SQLite, one COMMIT round trip on PostgreSQL) for all of them. Each caller is answered only
/// after that commit, so nothing is acknowledged before it is durable. An idle server commits
/// an upload at once: the group is whatever queued meanwhile, never a timer.
///
/// A job's own failure (a malformed changeset: `SessionFailure`) fails that job alone and
/// leaves nothing of it in the transaction (jobs fail before they write). Any other error is
/// the store's: the transaction rolls back and every job of the group gets it, so none is
/// acknowledged and their clients upload again.
final class GroupCommit<Result: Sendable>: @unchecked Sendable {
    /// One upload's reads, merge and write inside the group's transaction.
    typealias Work = @Sendable (any SyncWriteTransaction) async throws -> Result

    /// What a job will read: the group reads them ahead together (`prefetch`).
    struct Reads: Sendable {
        let clientFile: UInt64
        let keys: [ObjectKey]
    }

    private struct Job {
        let reads: Reads?
        let work: Work
        let answer: CheckedContinuation<Result, any Error>
    }

    private let storage: any SyncStorage
    /// Runs after each commit with the group's successful results in version order, before
    /// any job is answered (the hub's fan-out: other devices hear of a group's commits in
    /// order, and an uploader's answer comes after them).
    private let afterCommit: @Sendable ([Result]) async -> Void
    /// The most jobs in one transaction: bounds how long the first of them waits for the
    /// commit, and the transaction's size.
    let maxGroup: Int
    private let lock = ThreadLock()
    private var queued: [Job] = []
    private var leading = false
    /// Groups committed and jobs in them, for tests and the load tool's figures.
    private var counts = (groups: 0, jobs: 0)

    /// The schema the objects of `Reads` belong to.
    private let schema: Schema?

    init(storage: any SyncStorage, schema: Schema? = nil, maxGroup: Int = 256, afterCommit: @escaping @Sendable ([Result]) async -> Void = { _ in }) {
        self.storage = storage
        self.schema = schema
        self.maxGroup = max(1, maxGroup)
        self.afterCommit = afterCommit
    }

    /// Runs `work` in the next group's transaction; returns once that transaction committed.
    func commit(reads: Reads? = nil, _ work: @escaping Work) async throws -> Result {
        try await withCheckedThrowingContinuation { answer in
            let lead: Bool = lock.withLock {
                queued.append(Job(reads: reads, work: work, answer: answer))
                guard !leading else { return false }
                leading = true
                return true
            }
            if lead { Task { await self.lead() } }
        }
    }

    /// Jobs waiting for the next transaction (tests wait on it).
    var queuedCount: Int { lock.withLock { queued.count } }
    /// Whether a group is being committed.
    var running: Bool { lock.withLock { leading } }

    /// How many transactions committed and how many jobs they held.
    var committed: (groups: Int, jobs: Int) { lock.withLock { counts } }

    /// Commits groups until nothing is queued.
    private func lead() async {
        while true {
            let group: [Job] = lock.withLock {
                let n = min(queued.count, maxGroup)
                let group = Array(queued.prefix(n))
                queued.removeFirst(n)
                if group.isEmpty { leading = false }
                return group
            }
            guard !group.isEmpty else { return }
            await run(group)
        }
    }

    private func run(_ group: [Job]) async {
        let works = group.map(\.work)
        let reads = group.compactMap(\.reads)
        let schema = self.schema
        let outcomes: [Swift.Result<Result, SessionFailure>]
        do {
            outcomes = try await storage.writeTransaction { tx in
                if let schema, !reads.isEmpty {
                    try await tx.prefetch(clientFiles: reads.map(\.clientFile), keys: reads.flatMap(\.keys), schema: schema)
                }
                var out: [Swift.Result<Result, SessionFailure>] = []
                out.reserveCapacity(works.count)
                for work in works {
                    do { out.append(.success(try await work(tx))) } catch let failure as SessionFailure { out.append(.failure(failure)) }
                }
                return out
            }
        } catch {
            for job in group { job.answer.resume(throwing: error) }
            return
        }
        lock.withLock { counts = (counts.groups + 1, counts.jobs + group.count) }
        await afterCommit(outcomes.compactMap { if case .success(let r) = $0 { r } else { nil } })
        for (job, outcome) in zip(group, outcomes) {
            switch outcome {
            case .success(let r): job.answer.resume(returning: r)
            case .failure(let f): job.answer.resume(throwing: f)
            }
        }
    }
}
