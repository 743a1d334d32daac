import FerryCore

/// A client reset in progress on a session (loop thread): the file was bound again as a new
/// client file, and the fresh download of its subscriptions is staged in the file as it
/// arrives (`Database.stageResetDownload`, one small transaction per message, so memory holds
/// one message, not the state); when it is complete, `Database.resetToServerState` applies it
/// in one transaction. The file's data is not touched before that, so a crash or a lost
/// connection leaves the old data, which the server refuses again: the reset starts over, and
/// its first step clears whatever an earlier run staged.
package struct ClientResetRun {
    /// The server's error that started the reset (reported with the result).
    package var error: SyncError
    package var recover: Bool
    /// Why unsynced changes are discarded when `recover` is false.
    package var discardReason: String
    /// The new client file identity (0 until the server's IDENT).
    package var ident: UInt64 = 0
    package var salt: UInt64 = 0
    /// The subscription set version whose bootstrap completes the download (0: none sent).
    package var queryVersion: UInt64 = 0
    /// How many of the fresh download's changesets this run has staged.
    package var stagedChangesets = 0
}

/// The next step of a run, for the session to carry out (`SyncSession+ClientReset`).
enum ClientResetStep: Equatable {
    /// Ask for the data of the file's subscription set (version), on the new identity.
    case query(version: UInt64)
    /// The fresh state is all staged (or empty): apply it at this server version.
    case finish(serverVersion: UInt64)
    /// Wait for more of the download.
    case wait
}

/// The decisions of a client reset, without I/O (issue 25: deciding apart from doing). The
/// session reads the facts (the failures counted in the file, the subscription set), asks
/// here, and does what it is told; `ClientResetRunTests` covers each rule.
extension ClientResetRun {
    /// Failed resets in a row (counted in the file) after which the session stops trying and
    /// hands the reset to the error handler.
    static let maxFailures: UInt64 = 3

    /// The server refused the file's identity with `error`: the run the file's `mode` says to
    /// start, given whether the server allows recovery (`error.action`) and how many resets of
    /// this file failed in a row; or, thrown, the error to hand to the host's error handler
    /// (with why). Thrown rather than returned in an enum with two payloads: valgrind's
    /// memcheck flags the padding of such enums (Tests/c/valgrind.supp) in the C tests.
    static func start(_ error: SyncError, mode: ClientResetMode, failures: UInt64) throws(SyncError) -> ClientResetRun {
        let recoveryAllowed = error.action == .clientReset
        let recover: Bool
        let reason: String
        switch mode {
        case .manual:
            throw error
        case .recoverUnsyncedChanges:
            guard recoveryAllowed else {
                var e = error
                e.message += " (the server disabled recovery, and this database's client reset mode is recoverUnsyncedChanges: the host must handle it)"
                throw e
            }
            recover = true
            reason = ""
        case .recoverOrDiscardUnsyncedChanges:
            recover = recoveryAllowed && failures == 0
            reason = !recoveryAllowed ? "the server disabled recovery" : "an earlier recovery of these changes failed"
        case .discardUnsyncedChanges:
            recover = false
            reason = "the client reset mode is discardUnsyncedChanges"
        }
        guard failures < maxFailures else {
            var e = error
            e.message += " (the client reset failed \(failures) times in a row; it is not tried again automatically)"
            throw e
        }
        return ClientResetRun(error: error, recover: recover, discardReason: reason)
    }

    /// The server gave the new client file its identity; `subscriptionVersion` is the file's
    /// set (0: none, so the server's state for it is empty and there is nothing to download).
    mutating func identified(ident: UInt64, salt: UInt64, subscriptionVersion: UInt64) -> ClientResetStep {
        self.ident = ident
        self.salt = salt
        guard subscriptionVersion > 0 else { return .finish(serverVersion: 0) }
        queryVersion = subscriptionVersion
        return .query(version: subscriptionVersion)
    }

    /// A DOWNLOAD message of the fresh state was staged (`count` changesets): the run is
    /// complete with the last message of the set it asked for.
    mutating func staged(_ count: Int, serverVersion: UInt64, subscriptionVersion: UInt64, isLast: Bool) -> ClientResetStep {
        stagedChangesets += count
        return isLast && subscriptionVersion >= queryVersion ? .finish(serverVersion: serverVersion) : .wait
    }
}
