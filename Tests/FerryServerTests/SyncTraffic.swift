import FerryCore
import Foundation

/// Sync traffic for tests of clients that stop reading: one device subscribes to every item,
/// another uploads big ones, and the server sends each upload on to the first (what others'
/// changes make the server send a device counts in full against its outbox bound).
enum SyncTraffic {
    static let allItems = [Subscription(name: "all", objectType: "Item", query: "complexity >= 0")]

    /// BIND session 1 and subscribe to every item; returns once the server has answered (a
    /// PONG after them), so later uploads are sent on to this client.
    static func subscribe(_ client: RawClient) async throws -> Bool {
        try await client.send(WireFormat.message(.bind(session: 1, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
        try await client.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: allItems)))
        try await client.send(WireFormat.message(.ping(timestamp: 99)))
        return await client.wait(seconds: 60) { received, _ in
            guard let head = WireFormat.response(received) else { return false }
            return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains(.pong(timestamp: 99))
        }
    }

    /// Uploads `items` items of about `itemBytes` bytes each, owned by `userId` (so its role
    /// may write them), in session 1 of `client` (subscribed first).
    static func upload(_ client: RawClient, userId: String, items: Int, itemBytes: Int) async throws {
        // Distinct names: a changeset keeps one copy of equal strings.
        let filler = String(repeating: "x", count: itemBytes)
        let seconds = UInt32(Date().timeIntervalSince1970)
        for version in UInt64(1)...UInt64(items) {
            let create = Instruction.create(table: "Item", key: .objectId(ObjectId.generate(secondsSinceEpoch: seconds)), fields: [
                FieldValue(name: "ownerId", value: .string(userId)),
                FieldValue(name: "itemName", value: .string("\(version) \(filler)")),
                FieldValue(name: "complexity", value: .int(1)),
            ])
            let changeset = ChangesetCodec.encode(Changeset(timestamp: Int64(Date().timeIntervalSince1970 * 1e9) + Int64(version), instructions: [create]))
            try await client.send(WireFormat.message(.upload(session: 1, changesets: [
                UploadChangeset(clientVersion: version, lastIntegratedServerVersion: 0, changeset: changeset),
            ])))
        }
    }
}
