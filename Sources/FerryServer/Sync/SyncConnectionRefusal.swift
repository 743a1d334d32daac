import FerryCore

/// Why the server stops reading a sync connection: the ERROR the client gets before the
/// connection closes (also what the server logs).
struct SyncConnectionRefusal: Error {
    let error: ProtocolError


    static func violation(_ message: String) -> SyncConnectionRefusal {
        SyncConnectionRefusal(error: ProtocolError(session: 0, code: ProtocolError.Code.badMessage, message: message, tryAgain: false, action: .protocolViolation))
    }

    static func overloaded(limit: Int) -> SyncConnectionRefusal {
        SyncConnectionRefusal(error: ProtocolError(
            session: 0, code: ProtocolError.Code.overloaded,
            message: "the server holds too many bytes of incoming sync messages right now (at most \(limit)); try again later",
            tryAgain: true, action: .transient))
    }
}
