import Foundation
import FerryCore

/// A few dedicated threads for password hashing, with a bounded queue.
///
/// scrypt costs about half a second of CPU and 128 MiB per call (N = 2^17; issue 22). Run on Swift's cooperative
/// pool (or inside an actor every request passes through) a burst of wrong-password logins
/// kept the server's tasks, token checks of sync connections included, waiting behind it
/// (issue 11: a sync connect went from 1 ms to 1.1 s). Here the hashing can only ever occupy
/// `threads` threads of its own; callers suspend without blocking, and when more than
/// `maxQueued` hashes wait, a new one is refused at once (`AuthError.hashingBusy`).
///
/// Threads start on first use and end when the pool is released. A caller whose task is
/// cancelled while its job still waits gets `CancellationError` and the job never runs.
public final class PasswordHashingPool: Sendable {
    public let threads: Int
    public let maxQueued: Int
    private let state: State

    public init(threads: Int, maxQueued: Int) {
        self.threads = max(1, threads)
        self.maxQueued = max(0, maxQueued)
        state = State(threads: self.threads, maxQueued: self.maxQueued)
    }

    deinit { state.shutDown() }

    /// Runs `work` on one of the pool's threads and returns its result.
    public func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        let ticket = Ticket()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                state.submit(Job(ticket: ticket, run: {
                    let result = Result(catching: work)
                    return { continuation.resume(with: result) }
                }, fail: { continuation.resume(throwing: $0) }))
            }
        } onCancel: {
            state.cancel(ticket)
        }
    }

    /// The name the pool's threads carry (what `top -H` and a debugger show).
    public static let threadName = "ferry-hashing"

    /// The OS name of the calling thread.
    public static func currentThreadName() -> String { WorkerThread.currentThreadName() }

    /// Jobs waiting or running now.
    public var pendingJobs: Int { state.counts.pending }
    /// Jobs run to the end since the pool was made.
    public var completedJobs: Int { state.counts.completed }

    /// Who a job is for; `cancelled` (guarded by the pool's lock) catches a cancellation that
    /// comes before the job is submitted.
    private final class Ticket: @unchecked Sendable {
        var cancelled = false
    }

    /// One submitted closure; exactly one of `run` and `fail` is called, by whoever takes the
    /// job out of the queue under the lock. `run` does the work and returns how to answer the
    /// caller, so the counts are updated before the caller resumes.
    private struct Job {
        let ticket: Ticket
        let run: @Sendable () -> @Sendable () -> Void
        let fail: @Sendable (any Error) -> Void
    }

    private final class State: @unchecked Sendable {
        private let condition = ThreadLock()
        private let threads: Int
        private let maxQueued: Int
        // Guarded by `condition`:
        private var queue: [Job] = []
        private var started = 0
        private var idle = 0
        private var running = 0
        private var completed = 0
        private var shuttingDown = false

        init(threads: Int, maxQueued: Int) {
            self.threads = threads
            self.maxQueued = maxQueued
        }

        var counts: (pending: Int, completed: Int) { condition.withLock { (queue.count + running, completed) } }

        func submit(_ job: Job) {
            condition.lock()
            // Jobs a free thread takes at once do not count as queued.
            let refusal: (any Error)? = job.ticket.cancelled || shuttingDown ? CancellationError()
                : queue.count >= maxQueued + idle + (threads - started) ? AuthError.hashingBusy : nil
            if let refusal {
                condition.unlock()
                return job.fail(refusal)
            }
            queue.append(job)
            condition.signal()
            if queue.count > idle && started < threads {
                started += 1
                do {
                    try WorkerThread(name: PasswordHashingPool.threadName) { [self] in work() }.detach()
                } catch {
                    // No thread: the threads already running take the job; with none, it is
                    // refused (the login answers that the server is busy) rather than left.
                    started -= 1
                    if started == 0, let i = queue.lastIndex(where: { $0.ticket === job.ticket }) {
                        queue.remove(at: i)
                        condition.unlock()
                        return job.fail(AuthError.hashingBusy)
                    }
                }
            }
            condition.unlock()
        }

        func cancel(_ ticket: Ticket) {
            condition.lock()
            ticket.cancelled = true
            guard let index = queue.firstIndex(where: { $0.ticket === ticket }) else { return condition.unlock() }
            let job = queue.remove(at: index)
            condition.unlock()
            job.fail(CancellationError())
        }

        func shutDown() {
            condition.withLock {
                shuttingDown = true
                condition.broadcast()
            }
        }

        /// A thread's life: take the oldest job, run it outside the lock; end once shut down
        /// with nothing left (queued jobs still run, so every caller is answered).
        private func work() {
            condition.lock()
            while true {
                if queue.isEmpty {
                    if shuttingDown { break }
                    idle += 1
                    condition.wait()
                    idle -= 1
                    continue
                }
                let job = queue.removeFirst()
                running += 1
                condition.unlock()
                let answer = job.run()
                condition.withLock {
                    running -= 1
                    completed += 1
                }
                answer()
                condition.lock()
            }
            started -= 1
            condition.unlock()
        }
    }
}
