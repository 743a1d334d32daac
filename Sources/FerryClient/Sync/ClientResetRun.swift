import FerryCore

/// A client reset in progress on a session (loop thread): the file was bound again as a new
/// client file, and the fresh download of its subscriptions is staged in the file as it
/// arrives (`Database.stageResetDownload`, one small transaction per message, so memory holds
/// one message, not the state); when it is complete, `Database.resetToServerState` applies it
/// in one transaction. The file's data is not touched before that, so a crash or a lost
/// connection leaves the old data, which the server refuses again: the reset starts over, and
/// its first step clears whatever an earlier run staged.
struct ClientResetRun {
    /// The server's error that started the reset (reported with the result).
    var error: SyncError
    var recover: Bool
    /// Why unsynced changes are discarded when `recover` is false.
    var discardReason: String
    /// The new client file identity (0 until the server's IDENT).
    var ident: UInt64 = 0
    var salt: UInt64 = 0
    /// The subscription set version whose bootstrap completes the download (0: none sent).
    var queryVersion: UInt64 = 0
    /// How many of the fresh download's changesets this run has staged.
    var stagedChangesets = 0
}
