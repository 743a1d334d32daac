import Testing
@testable import FerryCore

/// How a commit reaches each session (`DeliveryRules`): from memory only when the session is
/// idle, exactly at the version before it and reading what it is sent; otherwise skipped and
/// caught up, never a version missed.
@Suite("Rules: delivery")
struct DeliveryRulesTests {
    typealias S = DeliveryRules.Session

    @Test func aCommitIsSentFromMemoryOnlyToAnIdleSessionExactlyBeforeIt() {
        let window = 1 << 20
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 10), before: 10, queuedBytes: 0, windowBytes: window) == .send)
        // No QUERY yet: nothing syncs.
        #expect(DeliveryRules.fanOut(S(hasQuery: false, busy: false, delivered: 10), before: 10, queuedBytes: 0, windowBytes: window) == .ignore)
        // Behind or ahead of the commit: skipped, and idle so the hub decides how it catches up.
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 9), before: 10, queuedBytes: 0, windowBytes: window) == .skip(idle: true))
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 11), before: 10, queuedBytes: 0, windowBytes: window) == .skip(idle: true))
        // A task sends to it: skipped, left to that task.
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: true, delivered: 10), before: 10, queuedBytes: 0, windowBytes: window) == .skip(idle: false))
        // Its client does not read: caught up from storage later, within the window.
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 10), before: 10, queuedBytes: window + 1, windowBytes: window) == .skip(idle: true))
        #expect(DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 10), before: 10, queuedBytes: window, windowBytes: window) == .send)
    }

    @Test func theQueueIsReadOnlyWhenItDecides() {
        var reads = 0
        func queued() -> Int { reads += 1; return 0 }
        _ = DeliveryRules.fanOut(S(hasQuery: true, busy: true, delivered: 10), before: 10, queuedBytes: queued(), windowBytes: 1)
        _ = DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 3), before: 10, queuedBytes: queued(), windowBytes: 1)
        #expect(reads == 0)
        _ = DeliveryRules.fanOut(S(hasQuery: true, busy: false, delivered: 10), before: 10, queuedBytes: queued(), windowBytes: 1)
        #expect(reads == 1)
    }

    @Test func aSkippedIdleSessionFollowsTheChainOrIsCaughtUp() {
        // Owed nothing past what it has (a catch-up read past the chain): it follows the chain.
        #expect(DeliveryRules.afterSkip(S(hasQuery: true, busy: false, delivered: 12, lastSkipped: 11), uploading: false) == .followChain)
        #expect(DeliveryRules.afterSkip(S(hasQuery: true, busy: false, delivered: 12, lastSkipped: 12), uploading: false) == .followChain)
        // Owed a commit it does not have: caught up now.
        #expect(DeliveryRules.afterSkip(S(hasQuery: true, busy: false, delivered: 9, lastSkipped: 11), uploading: false) == .catchUp)
        // Its own upload's answer, or a task that took it meanwhile, catches it up.
        #expect(DeliveryRules.afterSkip(S(hasQuery: true, busy: false, delivered: 9, lastSkipped: 11), uploading: true) == .leave)
        #expect(DeliveryRules.afterSkip(S(hasQuery: true, busy: true, delivered: 9, lastSkipped: 11), uploading: false) == .leave)
    }

    @Test func aSessionFollowsTheChainOnlyIfItMissedNothingOfIt() {
        let follows = { (s: S) in DeliveryRules.followsChain(s, chainStart: 10, chainHead: 15) }
        #expect(follows(S(hasQuery: true, busy: false, delivered: 10)))
        #expect(follows(S(hasQuery: true, busy: false, delivered: 15, lastSkipped: 12)))
        // Before the chain's start: a commit before it may concern it.
        #expect(!follows(S(hasQuery: true, busy: false, delivered: 9)))
        // Past the chain's head (a catch-up read further), busy, without a query, or owing a
        // commit it was skipped for.
        #expect(!follows(S(hasQuery: true, busy: false, delivered: 16)))
        #expect(!follows(S(hasQuery: true, busy: true, delivered: 12)))
        #expect(!follows(S(hasQuery: false, busy: false, delivered: 12)))
        #expect(!follows(S(hasQuery: true, busy: false, delivered: 12, lastSkipped: 13)))
    }

    @Test func catchUpAndAnswersFromMemory() {
        #expect(DeliveryRules.needsCatchUp(S(hasQuery: true, busy: false, delivered: 4), head: 5))
        #expect(!DeliveryRules.needsCatchUp(S(hasQuery: true, busy: false, delivered: 5), head: 5))
        #expect(!DeliveryRules.needsCatchUp(S(hasQuery: true, busy: true, delivered: 4), head: 5))
        #expect(!DeliveryRules.needsCatchUp(S(hasQuery: false, busy: false, delivered: 4), head: 5))
        #expect(DeliveryRules.answersFromMemory(S(hasQuery: true, busy: true, delivered: 7), before: 7))
        #expect(!DeliveryRules.answersFromMemory(S(hasQuery: true, busy: true, delivered: 6), before: 7))
        // Before its first QUERY a session has nothing in its view to miss.
        #expect(DeliveryRules.answersFromMemory(S(hasQuery: false, busy: true, delivered: 6), before: 7))
        #expect(!DeliveryRules.answersFromMemory(S(hasQuery: false, busy: true, delivered: 8), before: 7))
    }
}
