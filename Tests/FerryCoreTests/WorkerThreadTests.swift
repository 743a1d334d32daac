import FerryCore
import Synchronization
import Testing

/// Ferry's one worker-thread helper: the body runs on a thread of its own that carries the
/// name, and `join` waits for it to return.
@Suite struct WorkerThreadTests {
    @Test func theBodyRunsOnANamedThreadOfItsOwnAndJoinWaitsForIt() throws {
        let seen = Mutex<(name: String, current: Bool)?>(nil)
        // The thread waits until it can ask whether it is the worker's.
        let handle = LockedValue<WorkerThread?>(nil)
        let gate = ThreadLock()
        let worker = try WorkerThread(name: "ferry-test-worker-long-name") {
            var me: WorkerThread?
            gate.withLock {
                me = handle.withLock { $0 }
                while me == nil {
                    gate.wait(milliseconds: 50)
                    me = handle.withLock { $0 }
                }
            }
            seen.withLock { $0 = (WorkerThread.currentThreadName(), me?.isCurrent ?? false) }
        }
        gate.withLock {
            handle.withLock { $0 = worker }
            gate.broadcast()
        }
        worker.join()
        worker.join()  // a second join returns at once
        let result = seen.withLock { $0 }
        #expect(result?.name == "ferry-test-work", "Linux keeps 15 bytes of a thread's name")
        #expect(result?.current == true)
        #expect(!worker.isCurrent)
    }

    @Test func aDetachedThreadRunsToItsEnd() async throws {
        let done = Mutex(false)
        let gate = ThreadLock()
        try WorkerThread(name: "ferry-detached") {
            gate.withLock {
                done.withLock { $0 = true }
                gate.broadcast()
            }
        }.detach()
        gate.withLock { while !done.withLock({ $0 }) { gate.wait(milliseconds: 100) } }
        #expect(done.withLock { $0 })
    }
}
