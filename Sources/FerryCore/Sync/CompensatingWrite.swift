/// One object of a write the server rejected and reverted (SPEC F-CWINFO): the class, the
/// primary key and the exact reason the seeds' SDK reports.
public struct CompensatingWrite: Sendable, Equatable {
    public var objectType: String
    public var primaryKey: FerryValue
    public var reason: String

    public init(objectType: String, primaryKey: FerryValue, reason: String) {
        self.objectType = objectType
        self.primaryKey = primaryKey
        self.reason = reason
    }

    /// The write left the client's subscriptions (for example `complexity <= 4` and a write
    /// with complexity 7).
    public static func outsideView(objectType: String, primaryKey: FerryValue) -> CompensatingWrite {
        CompensatingWrite(objectType: objectType, primaryKey: primaryKey,
                          reason: "write to \"\(primaryKey.keyText)\" in table \"\(objectType)\" not allowed; object is outside of the current query view")
    }

    /// A create with a primary key that an object the user may not read already has (primary
    /// keys are unique per class across users). Says no more than that about the object.
    public static func keyTaken(objectType: String, primaryKey: FerryValue) -> CompensatingWrite {
        CompensatingWrite(objectType: objectType, primaryKey: primaryKey,
                          reason: "create of \"\(primaryKey.keyText)\" in table \"\(objectType)\" not allowed; the primary key is already in use by an object the user may not read")
    }

    /// The role's write filter refused the write (for example another user's `ownerId`).
    public static func deniedByWriteFilter(objectType: String, primaryKey: FerryValue, role: String) -> CompensatingWrite {
        CompensatingWrite(objectType: objectType, primaryKey: primaryKey,
                          reason: "write to \"\(primaryKey.keyText)\" in table \"\(objectType)\" was denied by write filter in role \"\(role)\"")
    }
}

/// The sync error codes and messages the seeds' SDK uses, kept exactly.
public enum SyncErrorText {
    public static let compensatingWriteMessage = "Client attempted a write that is outside of permissions or query filters; it has been reverted"

    /// The client's log line for a compensating write error.
    public static func compensatingWriteLogLine(connection: Int = 1, session: Int = 1) -> String {
        "Sync: Connection[\(connection)]: Session[\(session)]: Received: ERROR \"\(compensatingWriteMessage)\" (error_code=\(ProtocolError.Code.compensatingWrite), try_again=true, error_action=Warning)"
    }
}
