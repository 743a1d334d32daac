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
    /// The set `subscriptionVersion` names, as stored for the client file.
    var subscriptions: [Subscription] = []
    var acknowledged: UInt64 = 0
    /// The server version up to which the client has everything in its view: the version it
    /// had when it bound, then that of each download sent. The next download covers the
    /// history after it, so a session's downloads never skip a version, whichever node
    /// committed it.
    var delivered: UInt64
    /// The newest commit fanned out on this node that concerned the session while it could
    /// not be sent to it (busy, behind, or its own upload awaiting its answer): while it is
    /// newer than `delivered`, the session owes a catch-up and cannot follow the chain.
    var lastSkipped: UInt64 = 0
    /// Whether a task is sending to this session from storage (a QUERY's evaluation, a
    /// catch-up): then an upload's fan-out leaves it to that task (`SessionRegistry`).
    var busy = false

    var key: SessionKey { SessionKey(connection: outbox.id, session: id) }

    /// What the delivery rules decide on (`DeliveryRules`).
    var delivery: DeliveryRules.Session {
        DeliveryRules.Session(hasQuery: hasQuery, busy: busy, delivered: delivered, lastSkipped: lastSkipped)
    }
}

struct SessionKey: Hashable, Sendable {
    let connection: UInt64
    let session: UInt64
}
