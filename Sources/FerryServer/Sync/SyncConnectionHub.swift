import FerryCore

/// What a `SyncSocket` needs of the hub: `SyncHub` in the server, a stand-in in tests that
/// controls how long processing takes.
protocol SyncConnectionHub: Sendable {
    func openConnection(user: UserContext) async -> ConnectionOutbox
    func receive(_ message: ProtocolMessage, from outbox: ConnectionOutbox) async
    func closeConnection(_ outbox: ConnectionOutbox) async
}

extension SyncHub: SyncConnectionHub {}
