/// Whether the server lets a device's BIND of a client file it knows go on, or tells the device
/// to reset (SPEC F-RESET): the policy `SyncHub`'s bind applies, as a function of what the
/// server knows of the file. Pure: the hub reads the facts from storage, asks, then does what
/// the decision says (an ERROR, forgetting the file). A new file (ident 0) is not asked about:
/// it always gets a new identity.
public enum BindRules {
    /// What the server holds for the client file the device names (nil: nothing).
    public struct KnownFile: Sendable, Equatable {
        /// The salt the device sent is the file's (a file forgotten and reissued does not match).
        public var saltMatches: Bool
        /// The file belongs to the user who binds it.
        public var sameUser: Bool
        /// Seconds since the epoch of the file's last bind (0: never recorded).
        public var lastSeen: Int
        public init(saltMatches: Bool, sameUser: Bool, lastSeen: Int) {
            self.saltMatches = saltMatches
            self.sameUser = sameUser
            self.lastSeen = lastSeen
        }
    }

    /// Why a device must reset (the server's metric `ferry_client_resets_total{trigger}`).
    public enum ResetReason: String, Sendable, CaseIterable {
        /// Forgotten, or sync was enabled again after a terminate (which forgets every file).
        case unknownClientFile = "unknown_client_file"
        /// Offline longer than the app's client maximum offline time: the server forgets the
        /// file, since it no longer keeps what it would need to sync it.
        case maxOfflineTime = "max_offline_time"
        /// The device claims a server version the server never reached (a restored backup).
        case serverVersionAhead = "server_version_ahead"
    }

    public enum Decision: Sendable, Equatable {
        /// The file binds; its version is recorded.
        case bind
        /// The device must reset: ERROR `badClientFile` with the reset action, and the message.
        case reset(ResetReason, message: String)
        /// Another user's file: a protocol violation, not a reset.
        case refuse(message: String)
    }

    /// The decision for a BIND of client file `ident` at `lastServerVersion`, when the server's
    /// head is `head`, the time `now` (seconds since the epoch) and the app's client maximum
    /// offline time `maxOfflineDays` (0: none). The checks run in this order: a file the server
    /// does not know (or whose salt differs), another user's, offline too long, ahead of the head.
    public static func decide(ident: UInt64, file: KnownFile?, lastServerVersion: UInt64, head: UInt64,
                              now: Int, maxOfflineDays: Int) -> Decision {
        guard let file, file.saltMatches else {
            return .reset(.unknownClientFile, message: "the server does not know client file \(ident): the device must reset")
        }
        guard file.sameUser else { return .refuse(message: "client file \(ident) belongs to another user") }
        if maxOfflineDays > 0, file.lastSeen > 0, now - file.lastSeen > maxOfflineDays * 86_400 {
            return .reset(.maxOfflineTime, message: "client file \(ident) was last seen \((now - file.lastSeen) / 86_400) days ago, longer than the client maximum offline time of \(maxOfflineDays) days: the device must reset")
        }
        guard lastServerVersion <= head else {
            return .reset(.serverVersionAhead, message: "the client has server version \(lastServerVersion), newer than the server's \(head): the device must reset")
        }
        return .bind
    }

    /// The action a client-reset error carries: without recovery when the app's sync
    /// configuration disables it (`is_recovery_mode_disabled`), so the device discards or asks
    /// its host.
    public static func resetAction(recoveryDisabled: Bool) -> ErrorAction {
        recoveryDisabled ? .clientResetNoRecovery : .clientReset
    }
}
