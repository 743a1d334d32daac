/// One event of a user's sync log (connection opened, session bound, upload, compensating
/// write…), kept in the store so every node of a cluster shows the same log.
public struct SyncLogEntry: Sendable, Equatable {
    /// Assigned by the store (0 before `appendSyncLog`); grows with every entry, so it orders
    /// entries and pages through them.
    public var id: Int64
    /// Milliseconds since the epoch.
    public var timeMilliseconds: Int64
    public var kind: SyncLogKind
    public var userId: String
    /// The node that served the connection.
    public var node: String
    /// The connection on that node (0 when the event belongs to no connection).
    public var connectionId: UInt64
    public var message: String
    /// A JSON object (text) with the kind's details; "{}" when there are none.
    public var details: String

    public init(id: Int64 = 0, timeMilliseconds: Int64, kind: SyncLogKind, userId: String, node: String, connectionId: UInt64,
                message: String, details: String = "{}") {
        self.id = id
        self.timeMilliseconds = timeMilliseconds
        self.kind = kind
        self.userId = userId
        self.node = node
        self.connectionId = connectionId
        self.message = message
        self.details = details
    }
}

/// What a sync log entry records; the raw values are the admin API's `kind`.
public enum SyncLogKind: String, Sendable, CaseIterable {
    case connectionOpened = "connection_opened"
    case connectionClosed = "connection_closed"
    case sessionBound = "session_bound"
    case sessionUnbound = "session_unbound"
    case subscriptionChanged = "subscription_changed"
    case upload
    case compensatingWrite = "compensating_write"
    case clientReset = "client_reset"
    case error
    /// A Data API call (a backend's, with a server key, or a user's access token).
    case dataAPI = "data_api"
    /// A backend's SQL transaction on the SQL tables, integrated or refused.
    case sqlWrite = "sql_write"
}
