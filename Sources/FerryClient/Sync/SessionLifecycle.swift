/// Where a session is in its life, as one value (loop thread). It replaces five flags of
/// `SyncSession` (ready, closed, paused, standby, fatal), some of whose combinations meant
/// nothing; the transitions say which events may change what, and return whether they did,
/// so the session runs an effect only for a change (`SessionLifecycleTests`).
///
/// Invariants:
/// - `ready` (bound and identified: messages may flow) only while live, not paused and not
///   in standby: every transition out of those clears it;
/// - closed and failed are final: neither is undone, and `fatal` keeps the first fatal error;
/// - a session wants a connection exactly when it is live, not paused and not in standby.
struct SessionLifecycle {
    private(set) var ready = false
    private(set) var closed = false
    /// Suspended by the host (`SyncSession.suspend()`).
    private(set) var paused = false
    /// Another process is the file's sync agent; this one waits for the role.
    private(set) var standby = false
    /// The fatal error that stopped the session for good.
    private(set) var fatal: SyncError?

    /// Neither closed nor stopped by a fatal error: host calls and events still act.
    var isLive: Bool { !closed && fatal == nil }
    /// Should be on a connection.
    var wantsConnection: Bool { isLive && !paused && !standby }

    /// Bound and identified on a connection (or a reset finished there); false when the
    /// session may not be ready (closed, failed, paused, in standby).
    @discardableResult mutating func becameReady() -> Bool {
        guard wantsConnection else { return false }
        ready = true
        return true
    }

    /// The connection was lost, or the session binds again (a new connection, a client reset).
    mutating func notReady() { ready = false }

    /// True if the session was live and not paused.
    mutating func pause() -> Bool {
        guard isLive, !paused else { return false }
        paused = true
        ready = false
        return true
    }

    /// True if the session was live and paused.
    mutating func resume() -> Bool {
        guard isLive, paused else { return false }
        paused = false
        return true
    }

    /// True if the session was live (it waits for the sync agent role from now on).
    mutating func enterStandby() -> Bool {
        guard isLive else { return false }
        standby = true
        ready = false
        return true
    }

    /// True if the session was live and in standby (it has the role now).
    mutating func leaveStandby() -> Bool {
        guard isLive, standby else { return false }
        standby = false
        return true
    }

    /// Closed by the host; false if it already was.
    mutating func close() -> Bool {
        guard !closed else { return false }
        closed = true
        ready = false
        return true
    }

    /// A fatal error; false if one came before (the first is kept).
    mutating func fail(_ error: SyncError) -> Bool {
        guard fatal == nil else { return false }
        fatal = error
        ready = false
        return true
    }
}
