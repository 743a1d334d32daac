import FerryCore

/// What a `SyncSocket` needs of the hub: `SyncHub` in the server, a stand-in in tests that
/// controls how long processing takes.
protocol SyncConnectionHub: Sendable {
    func openConnection(user: UserContext) async -> ConnectionOutbox
    func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async
    /// Handles a message with what `prepareAhead` made for it.
    func receive(_ message: ProtocolMessage, prepared: PreparedUpload?, from outbox: ConnectionOutbox) async
    /// Work on an upload that may run while the connection's previous upload is handled (nil:
    /// none; `receive` does it all).
    func prepareAhead(session: UInt64, _ changesets: [UploadChangeset], from outbox: ConnectionOutbox) async -> PreparedUpload?
    func closeConnection(_ outbox: ConnectionOutbox) async
}

extension SyncConnectionHub {
    func receive(_ message: ProtocolMessage, prepared: PreparedUpload?, from outbox: ConnectionOutbox) async {
        await receive(message, from: outbox)
    }

    func prepareAhead(session: UInt64, _ changesets: [UploadChangeset], from outbox: ConnectionOutbox) async -> PreparedUpload? { nil }
}

extension SyncHub: SyncConnectionHub {}
