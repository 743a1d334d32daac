import FerryCore

/// A client reset in progress on a session (loop thread): the file was bound again as a new
/// client file, and the fresh download of its subscriptions is collected here until it is
/// complete; then `Database.resetToServerState` applies it in one transaction. Nothing is
/// written to the file before that, so a crash or a lost connection leaves the old file,
/// which the server refuses again: the reset starts over.
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
    /// The server's objects and erases, in the order they came.
    var fresh: [Instruction] = []
}
