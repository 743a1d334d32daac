/// What the server asks the client to do about an error.
public enum ErrorAction: UInt8, Sendable {
    case warning = 0, transient, applicationBug, protocolViolation, deleteRealm, clientReset, clientResetNoRecovery, revertToPBS, refreshUser, refreshLocation, logOutUser
}

/// An ERROR message (docs/protocol.md, "Errors"): the session it ends (0: the whole
/// connection), its code (one of `Code`), what the client should do, and for a compensating
/// write the writes the server reverted.
public struct ProtocolError: Sendable, Equatable {
    public var session: UInt64
    public var code: Int32
    public var message: String
    public var tryAgain: Bool
    public var action: ErrorAction
    public var compensatingWrites: [CompensatingWrite]
    public init(session: UInt64, code: Int32, message: String, tryAgain: Bool, action: ErrorAction, compensatingWrites: [CompensatingWrite] = []) {
        self.session = session
        self.code = code
        self.message = message
        self.tryAgain = tryAgain
        self.action = action
        self.compensatingWrites = compensatingWrites
    }
}

extension ProtocolError {
    /// Every error code of the sync protocol (docs/protocol.md, "Errors"), in one place: the
    /// server sends them and the client tells them apart by these names, never by number.
    public enum Code {
        /// Not the server's: an error of the device itself (the App closed, a reset that
        /// could not finish), reported the same way.
        public static let local: Int32 = 0
        /// A malformed message, a text frame, a message over the maximum size, or a
        /// server-only message from a client (the connection is closed).
        public static let badMessage: Int32 = 201
        /// A message for a session that is not bound.
        public static let sessionNotBound: Int32 = 203
        /// BIND of a session id already bound.
        public static let sessionAlreadyBound: Int32 = 204
        /// Unknown client file, wrong salt, or a server version from the future: client reset.
        public static let badClientFile: Int32 = 208
        /// A malformed or schema-violating changeset.
        public static let badChangeset: Int32 = 212
        /// A bad subscription set (unknown class, bad query, non-queryable field, over a limit).
        public static let badQuery: Int32 = 226
        /// A compensating write: the seeds' `writeRejected` (SyncErrorText's message).
        public static let compensatingWrite: Int32 = 231
        /// Sync is disabled (terminated by an admin).
        public static let syncDisabled: Int32 = 240
        /// The server holds too many bytes of incoming messages, all connections together.
        public static let overloaded: Int32 = 241
        /// The connection fell behind: more than the bound waited to be sent to it.
        public static let fellBehind: Int32 = 242
        /// The user has as many sync connections open as allowed.
        public static let tooManyConnections: Int32 = 243
        /// BIND beyond the sessions one connection may carry.
        public static let tooManySessions: Int32 = 244
        /// Sync is paused by an admin.
        public static let syncPaused: Int32 = 245
        /// The user's session is no longer valid (revoked, disabled, deleted): log out.
        public static let unauthorized: Int32 = 401
        /// The server's store is unavailable for now.
        public static let storageUnavailable: Int32 = 503
    }

    /// Every code the server sends (not `local`), for checks such as the one that holds
    /// docs/protocol.md to this list.
    public static let allCodes: [Int32] = [Code.badMessage, Code.sessionNotBound, Code.sessionAlreadyBound, Code.badClientFile, Code.badChangeset,
                                           Code.badQuery, Code.compensatingWrite, Code.syncDisabled, Code.overloaded, Code.fellBehind,
                                           Code.tooManyConnections, Code.tooManySessions, Code.syncPaused, Code.unauthorized,
                                           Code.storageUnavailable]
}
