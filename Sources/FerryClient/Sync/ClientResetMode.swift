/// What a synced database does when the server asks for a client reset (SPEC F-RESETMODES):
/// the server can no longer sync with the file, which must become the server's state again.
public enum ClientResetMode: Int32, Sendable {
    /// Reset, then put the unsynced local changes back on top by the recovery rules (SPEC
    /// F-RECOVERY). When the server disables recovery, the reset goes to the error handler as
    /// with `manual`.
    case recoverUnsyncedChanges = 0
    /// Recover when the server allows it and recovery works; otherwise reset and discard.
    case recoverOrDiscardUnsyncedChanges = 1
    /// Reset and drop the unsynced local changes (each is in the reset report).
    case discardUnsyncedChanges = 2
    /// Do nothing by itself: the error handler gets the client-reset error and decides.
    case manual = 3
}
