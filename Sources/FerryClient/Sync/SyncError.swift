import FerryCore
import FerryStore

/// A sync error as the App's error handler receives it (SPEC F-ERRHANDLER).
public struct SyncError: Sendable, Error {
    public var code: Int32
    public var message: String
    /// The session cannot continue (it stops syncing).
    public var isFatal: Bool
    public var action: ErrorAction
    public var compensatingWrites: [CompensatingWrite]
    /// For a compensating write (231): what the revert took from the device (SPEC F-NOLOSS),
    /// one record per object of `compensatingWrites` that lost something (the device's values,
    /// later local writes), in the order they are first named. `reverted(for:)` finds one.
    public var revertedObjects: [RevertedObject] = []
    /// For a client reset that ran: what became of every object the unsynced changes touched.
    public var clientResetReport: ClientResetReport?
    /// For a client reset left to the host (SPEC F-RESETMANUAL): where the database file will
    /// be moved, and the token for `App.immediatelyHandleClientReset` (the database's path).
    /// Without that call the reset happens when the database is next opened.
    public var clientResetBackupPath: String?
    public var clientResetToken: String?

    public init(code: Int32, message: String, isFatal: Bool, action: ErrorAction, compensatingWrites: [CompensatingWrite] = [],
                clientResetReport: ClientResetReport? = nil) {
        self.code = code
        self.message = message
        self.isFatal = isFatal
        self.action = action
        self.compensatingWrites = compensatingWrites
        self.clientResetReport = clientResetReport
    }

    /// What the revert of one compensating write took from the device, or nil when it took
    /// nothing (the object ends as the device had it, or it was not the device's to lose).
    public func reverted(for write: CompensatingWrite) -> RevertedObject? {
        revertedObjects.first { $0.objectType == write.objectType && $0.primaryKey == write.primaryKey }
    }

    public var asFerryError: FerryError { FerryError(.sync, "sync error \(code): \(message)") }
}

/// The log levels of the App's logger (SPEC F-LOG).
public enum LogLevel: Int32, Sendable, Comparable {
    case all = 0, trace, debug, detail, info, warn, error, fatal, off
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}
