import FerrySyncStorage

/// The admin's actions on sync (terminate, enable, pause, resume) and on a user's connections
/// (disabled, deleted, sessions revoked), for the admin API. The stored sync state is the truth
/// every node follows (`SyncState`: kept in storage, so a restart does not undo an action);
/// which transitions are allowed and what each records is decided by `SyncAdminRules`, pure;
/// this type reads and writes storage accordingly and has the hub act on the new state (`apply`:
/// a stop ends this node's connections; other nodes hear it through the change feed).
struct SyncAdministration: Sendable {
    let hub: SyncHub
    let storage: any SyncStorage
    let events: ServerEventLog

    /// An admin action that does not apply to the sync state as it is (the admin API's 409).
    struct Conflict: Error {
        let mode: SyncState.Mode
        let message: String
    }

    /// Stops sync for everyone, on every node; devices keep their data and retry until sync is
    /// enabled. Allowed while paused (the pause becomes a terminate).
    @discardableResult func terminate() async throws -> SyncState { try await run(.terminate) }

    /// Enables sync again with a new sync identity: every device known before must reset.
    /// Refused while paused.
    @discardableResult func enable() async throws -> SyncState { try await run(.enable) }

    /// Stops sync like a terminate but keeps the sync identity and every client file, until a
    /// resume. Refused when terminated.
    @discardableResult func pause() async throws -> SyncState { try await run(.pause) }

    /// Starts sync again after a pause with the same sync identity. Refused unless paused.
    @discardableResult func resume() async throws -> SyncState { try await run(.resume) }

    private func run(_ action: SyncAdminRules.Action) async throws -> SyncState {
        let before = try await storage.syncState()
        switch SyncAdminRules.precheck(action, current: before.mode) {
        case .proceed:
            break
        case .unchanged:
            await hub.apply(before)
            return before
        case .conflict(let mode, let message):
            await hub.apply(before)
            throw Conflict(mode: mode, message: message)
        }
        let state: SyncState = switch action {
        case .terminate: try await storage.setSyncEnabled(false)
        case .enable: try await storage.setSyncEnabled(true)
        case .pause: try await storage.setSyncPaused(true)
        case .resume: try await storage.setSyncPaused(false)
        }
        await hub.apply(state)
        let outcome = SyncAdminRules.outcome(action, before: before.mode, after: state.mode)
        if let event = outcome.event { await events.record(kind: event.kind, userId: nil, message: event.message) }
        if let conflict = outcome.conflict { throw Conflict(mode: conflict.mode, message: conflict.message) }
        return state
    }

    /// A user was disabled (in the user directory): this node ends the user's connections, and
    /// every other node does when it hears the state revision move.
    func userDisabled(_ userId: String) async throws {
        await hub.disconnect(userId: userId, message: "the user was disabled")
        try await storage.bumpStateRevision()
    }

    /// A user's sessions were revoked: this node ends the user's connections, and every other
    /// node ends those opened before the revocation when it hears the state revision move.
    func sessionsRevoked(_ userId: String) async throws {
        await hub.disconnect(userId: userId, message: SyncAdminRules.sessionsRevokedMessage)
        try await storage.bumpStateRevision()
    }

    /// A user was deleted from the directory: ended here, and on every other node when it hears
    /// the state revision move (the user is no longer found).
    func userDeleted(_ userId: String) async throws {
        await hub.disconnect(userId: userId, message: "the user was deleted")
        try await storage.bumpStateRevision()
    }
}

/// Which admin actions on the sync state apply to which state, and what each one records:
/// decided from the modes alone (`SyncAdministration` does the reads and writes).
enum SyncAdminRules {
    enum Action: Sendable, CaseIterable { case terminate, enable, pause, resume }

    /// Before storage is written.
    enum Precheck: Equatable {
        /// Write the new state.
        case proceed
        /// Nothing to change (enabling enabled sync): answer with the state as it is.
        case unchanged
        /// Refused (the admin API's 409) in the mode sync is in.
        case conflict(SyncState.Mode, String)
    }

    /// After storage was written: what to record in the event log, and whether the action
    /// turned out refused after all (another admin changed the state in between).
    struct Outcome: Equatable {
        var event: Event?
        var conflict: Conflict?
        struct Event: Equatable { let kind: String; let message: String }
        struct Conflict: Equatable { let mode: SyncState.Mode; let message: String }
    }

    static func precheck(_ action: Action, current: SyncState.Mode) -> Precheck {
        switch (action, current) {
        case (.terminate, _), (.pause, _):
            // A pause of terminated sync is refused after the write, which changes nothing then.
            return .proceed
        case (.enable, .enabled): return .unchanged
        case (.enable, .paused): return .conflict(.paused, enableWhilePausedMessage)
        case (.enable, .terminated): return .proceed
        case (.resume, .paused): return .proceed
        case (.resume, .enabled): return .conflict(.enabled, "sync is not paused: it is enabled already")
        case (.resume, .terminated):
            return .conflict(.terminated, "sync is terminated, not paused: a terminate cannot be resumed; enable starts sync with a new sync identity (every device resets)")
        }
    }

    static func outcome(_ action: Action, before: SyncState.Mode, after: SyncState.Mode) -> Outcome {
        switch action {
        case .terminate:
            guard before != .terminated else { return Outcome() }
            return Outcome(event: .init(kind: "sync_terminated", message: before == .paused ? "sync terminated by an admin while paused" : "sync terminated by an admin"))
        case .enable:
            if after == .paused { return Outcome(conflict: .init(mode: .paused, message: enableWhilePausedMessage)) }
            return Outcome(event: .init(kind: "sync_enabled", message: "sync enabled by an admin; known client files were forgotten"))
        case .pause:
            switch after {
            case .terminated:
                return Outcome(conflict: .init(mode: .terminated, message: "sync is terminated: only an enable restarts it (with a new sync identity); a pause applies to enabled sync"))
            case .paused:
                guard before == .enabled else { return Outcome() }
                return Outcome(event: .init(kind: "sync_paused", message: "sync paused by an admin; devices keep their data and wait for a resume"))
            case .enabled:
                // Resumed or enabled by another admin between the store's change and this answer.
                return Outcome()
            }
        case .resume:
            guard after == .enabled else {
                return Outcome(conflict: .init(mode: after, message: "sync was terminated by another admin meanwhile: enable starts sync with a new sync identity"))
            }
            return Outcome(event: .init(kind: "sync_resumed", message: "sync resumed by an admin; client files were kept"))
        }
    }

    static let enableWhilePausedMessage = "sync is paused: resume it (POST /api/admin/v1/sync/resume) to keep the devices' data, "
        + "or terminate it first (POST /api/admin/v1/sync/terminate) to start a new sync identity with enable"

    static let sessionsRevokedMessage = "the user's sessions were revoked by an admin; log in again"
}
