import FerryCore
import FerryStore

/// The session's subscription side (SPEC F-SUBS, F-REQSUB, F-WAIT): the host's set and its waits, the
/// QUERY messages that send it, and what the server's answers (a completed bootstrap, a
/// rejected set) record in the file. Loop thread, except the host's calls.
extension SyncSession {
    /// The current subscription set, as stored in the database.
    public func subscriptions() throws -> SubscriptionSet { try SubscriptionSet.load(database) }

    /// Updates the subscription set atomically: `body` edits a copy; the result becomes the
    /// next version (state pending) and is sent to the server. Returns the new version.
    @discardableResult
    public func updateSubscriptions(_ body: (inout SubscriptionSet) throws -> Void) throws -> UInt64 {
        var set = try SubscriptionSet.load(database)
        try body(&set)
        set.version += 1
        set.state = .pending
        set.errorMessage = ""
        try set.save(database)
        precheck?.update(subscriptions: set.subscriptions)
        let v = set.version
        progress.expectDownload()
        app.loop.post { [self] in sendQuery() }
        return v
    }

    /// Calls `done` once the subscription set of `version` (or a later one) is complete, or
    /// with the error that stopped it.
    public func waitForSubscriptions(version: UInt64, _ done: @escaping @Sendable (FerryError?) -> Void) {
        app.loop.post { [self] in
            if let f = fatal { return done(f.asFerryError) }
            waits.waitForSubscriptions(version: version, done)
            checkSubscriptionWaiters()
        }
    }

    /// Sends the stored set if the session has not (`bound`: the first QUERY after binding a
    /// known file, which may name the set the data reflects first: `SessionMachine.query`).
    func sendQuery(bound: Bool = false) {
        guard ready, sessionId != nil else { return }
        let set: SubscriptionSet
        do { set = try SubscriptionSet.load(database) } catch {
            // Unread, the set is never sent: its waiters would wait for ever (issue 22, point 10).
            return fail(SyncError(code: ProtocolError.Code.local, message: "cannot read the subscription set of \(path): \(error)", isFatal: true, action: .applicationBug))
        }
        guard machine.wantsQuery(version: set.version) else { return }
        var reflected: (version: UInt64, subscriptions: [Subscription])?
        if SessionMachine.namesReflectedFirst(bound: bound, pending: set.state == .pending) {
            do { reflected = try SubscriptionSet.reflected(database) } catch {
                return fail(SyncError(code: ProtocolError.Code.local, message: "cannot read the subscription set \(path) last completed: \(error)", isFatal: true, action: .applicationBug))
            }
        }
        run(machine.query(version: set.version, subscriptions: set.subscriptions, reflected: reflected))
    }

    func subscriptionCompleted(_ version: UInt64) {
        // A download that completes no set (version 0) reads nothing.
        guard version > 0 else { return checkSubscriptionWaiters() }
        // What the data reflects first: a crash between the two leaves the set pending, and
        // the next connection only asks for it again.
        do {
            var set = try SubscriptionSet.load(database)
            guard set.version == version, set.state != .complete else {
                checkSubscriptionWaiters()
                return
            }
            set.state = .complete
            try set.saveAsReflected(database)
            try set.save(database)
        } catch {
            return fail(SyncError(code: ProtocolError.Code.local, message: "cannot record subscription set \(version) of \(path) as complete: \(error)", isFatal: true, action: .applicationBug))
        }
        checkSubscriptionWaiters()
    }

    func subscriptionFailed(_ message: String) {
        do {
            var set = try SubscriptionSet.load(database)
            guard set.version == sentQueryVersion else { return }
            set.state = .error
            set.errorMessage = message
            try set.save(database)
        } catch {
            return fail(SyncError(code: ProtocolError.Code.local, message: "cannot record that the server rejected subscription set \(sentQueryVersion) of \(path) (\(message)): \(error)",
                                  isFatal: true, action: .applicationBug))
        }
        checkSubscriptionWaiters()
    }

    func checkSubscriptionWaiters() {
        let set: SubscriptionSet
        do { set = try SubscriptionSet.load(database) } catch {
            // A wait that cannot read the set would never be answered: it fails with the reason.
            let e = FerryError(.io, "cannot read the subscription set of \(path): \(error)")
            app.log(.error, e.message)
            for done in waits.takeSubscriptions() { done(e) }
            return
        }
        for (done, outcome) in waits.subscriptionsDone(version: set.version, state: set.state, errorMessage: set.errorMessage) { done(outcome) }
    }
}
