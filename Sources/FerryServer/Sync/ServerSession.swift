import FerryCore

/// One bound session: a client file of a user, on one connection, with its current view.
struct ServerSession: Sendable {
    let outbox: ConnectionOutbox
    let id: UInt64
    var clientFile: UInt64
    var view: SessionView
    /// Whether a QUERY has been processed (F-REQSUB: nothing syncs before).
    var hasQuery = false
    var subscriptionVersion: UInt64 = 0
    var acknowledged: UInt64 = 0
    /// The server version the client had when it bound (catch-up starts there).
    var bindVersion: UInt64

    var key: SessionKey { SessionKey(connection: outbox.id, session: id) }
}

struct SessionKey: Hashable, Sendable {
    let connection: UInt64
    let session: UInt64
}
