import FerryTestSupport
import FerryCore
import Foundation
import Testing

/// A device on a raw sync socket for the operations tests: it may name its SDK, binds,
/// subscribes to the items of complexity at most 4, and uploads writes the server accepts or
/// compensates (outside the view: complexity 7; another owner: the write filter).
struct OperationsDevice {
    let client: RawClient
    let userId: String
    static let view = [Subscription(name: "simple", objectType: "Item", query: "complexity <= 4")]

    /// Connects a new anonymous user's device.
    static func connect(port: Int, sdk: String?) async throws -> OperationsDevice {
        let user = try await LiveServer.anonymousUser(port: port)
        return try await connect(port: port, user: user, sdk: sdk)
    }

    static func connect(port: Int, user: (id: String, token: String), sdk: String?) async throws -> OperationsDevice {
        let client = try await RawClient.connect(port: port)
        var request = WireFormat.upgradeRequest(token: user.token)
        // "\r\n" is one Character: drop the blank line, add the header and a new blank line.
        if let sdk { request = String(request.dropLast(1)) + "X-Ferry-SDK: \(sdk)\r\n\r\n" }
        try await client.send(request)
        let upgraded = await client.wait(seconds: 60) { received, _ in WireFormat.response(received) != nil }
        try #require(upgraded && WireFormat.response(client.received)?.status == 101)
        return OperationsDevice(client: client, userId: user.id)
    }

    var messages: [ProtocolMessage] {
        guard let head = WireFormat.response(client.received) else { return [] }
        return WireFormat.messages(WireFormat.frames(client.received[head.headEnd...]))
    }

    /// Waits until the server sent a message `match` accepts.
    func waitFor(_ what: String, _ match: @escaping @Sendable (ProtocolMessage) -> Bool) async throws {
        let seen = await client.wait(seconds: 60) { received, _ in
            guard let head = WireFormat.response(received) else { return false }
            return WireFormat.messages(WireFormat.frames(received[head.headEnd...])).contains(where: match)
        }
        try #require(seen, "the server did not send \(what)")
    }

    /// BIND session 1 and subscribe; returns once the bootstrap arrived (a PONG after it).
    func subscribe() async throws {
        try await client.send(WireFormat.message(.bind(session: 1, database: "items", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0)))
        try await client.send(WireFormat.message(.query(session: 1, version: 1, subscriptions: Self.view)))
        try await client.send(WireFormat.message(.ping(timestamp: 7)))
        try await waitFor("the PONG after the bootstrap") { $0 == .pong(timestamp: 7) }
    }

    static func create(_ key: ObjectId, owner: String, complexity: Int64) -> Instruction {
        .create(table: "Item", key: .objectId(key), fields: [
            FieldValue(name: "ownerId", value: .string(owner)), FieldValue(name: "itemName", value: .string("item")),
            FieldValue(name: "complexity", value: .int(complexity)),
        ])
    }

    /// Uploads, as client version `version`, one accepted create, one outside the view and one
    /// for another owner; returns once the compensating-write error arrived. The keys: the
    /// accepted one, the one outside the view, the other owner's.
    @discardableResult
    func uploadWithRejections(version: UInt64 = 1) async throws -> [ObjectId] {
        let seconds = UInt32(Date().timeIntervalSince1970)
        let keys = (0..<3).map { _ in ObjectId.generate(secondsSinceEpoch: seconds) }
        let instructions = [Self.create(keys[0], owner: userId, complexity: 1), Self.create(keys[1], owner: userId, complexity: 7),
                            Self.create(keys[2], owner: "someone-else", complexity: 2)]
        let changeset = ChangesetCodec.encode(Changeset(timestamp: Int64(Date().timeIntervalSince1970 * 1e9), instructions: instructions))
        try await client.send(WireFormat.message(.upload(session: 1, changesets: [
            UploadChangeset(clientVersion: version, lastIntegratedServerVersion: 0, changeset: changeset),
        ])))
        try await waitFor("the compensating-write error") { if case .error(let e) = $0 { return e.code == 231 } else { return false } }
        return keys
    }
}

/// Admin API calls for the operations tests.
enum AdminCall {
    static func get(port: Int, _ path: String, token: String? = LiveServer.adminToken) async throws -> (status: Int, json: Any?) {
        try await call(port: port, "GET", path, token: token)
    }

    static func call(port: Int, _ method: String, _ path: String, token: String? = LiveServer.adminToken) async throws -> (status: Int, json: Any?) {
        let response = try await LiveServer.request(port: port, method, path, headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        let status = WireFormat.response(response)?.status ?? 0
        let body = WireFormat.body(response) ?? ""
        return (status, body.isEmpty ? nil : try? JSONSerialization.jsonObject(with: Data(body.utf8)))
    }

    /// Calls until `done` accepts the answer, for at most `seconds`: what a device did reaches
    /// the sync log a moment after the device heard back.
    static func eventually(seconds: Double = 30, _ what: String, _ attempt: () async throws -> Bool) async throws {
        if try await !poll(seconds: seconds, attempt) { Issue.record("timed out waiting for \(what)") }
    }
}
