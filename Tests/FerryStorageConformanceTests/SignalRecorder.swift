import FerrySyncStorage

/// Collects a change feed's signals from a task of its own, so a test can wait for the signal
/// it expects (with `within`) instead of sleeping.
actor SignalRecorder {
    private(set) var signals: [FeedSignal] = []
    private(set) var ended = false
    private struct Waiter {
        let matches: @Sendable (FeedSignal) -> Bool
        let continuation: CheckedContinuation<FeedSignal, Never>
    }
    private var waiters: [Waiter] = []
    private var endWaiters: [CheckedContinuation<Void, Never>] = []
    private var task: Task<Void, Never>?

    /// Starts consuming `stream`.
    static func listening(to stream: AsyncStream<FeedSignal>) async -> SignalRecorder {
        let recorder = SignalRecorder()
        await recorder.start(stream)
        return recorder
    }

    private func start(_ stream: AsyncStream<FeedSignal>) {
        task = Task { [weak self] in
            for await signal in stream { await self?.record(signal) }
            await self?.finish()
        }
    }

    private func record(_ signal: FeedSignal) {
        signals.append(signal)
        var waiting: [Waiter] = []
        for w in waiters {
            if w.matches(signal) { w.continuation.resume(returning: signal) } else { waiting.append(w) }
        }
        waiters = waiting
    }

    private func finish() {
        ended = true
        endWaiters.forEach { $0.resume() }
        endWaiters = []
    }

    /// The first signal so far or from now on that `matches`.
    func first(where matches: @escaping @Sendable (FeedSignal) -> Bool) async -> FeedSignal {
        if let s = signals.first(where: matches) { return s }
        return await withCheckedContinuation { waiters.append(Waiter(matches: matches, continuation: $0)) }
    }

    /// Returns when the stream has ended.
    func end() async {
        if ended { return }
        await withCheckedContinuation { endWaiters.append($0) }
    }

    func stop() { task?.cancel() }
}
