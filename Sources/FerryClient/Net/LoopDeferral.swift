/// Runs loop-thread work on a later turn of the loop. Network objects report their final event
/// this way when there is no libuv callback left to report it from, so callers never see a
/// callback re-entering the call that caused it.
struct LoopDeferral: @unchecked Sendable {
    // Unchecked: the closure is created on the loop thread and runs there, and `post` orders the two.
    private let work: () -> Void

    static func run(on loop: EventLoop, _ work: @escaping () -> Void) {
        let deferral = LoopDeferral(work: work)
        loop.post { deferral.work() }
    }
}
