import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// Issue 11, points 1 and 2, end to end: what a host commits is what every device ends with.
/// The writes of one transaction apply in their order on the server (a create then a set, a
/// field set twice), and a changeset stamped by a broken clock cannot outrank the edits the
/// user's other devices make afterwards.
@Suite("Write order and client clocks end to end", .serialized)
struct WriteOrderSyncTests {
    static func pair(_ url: String, _ subject: String) async throws -> (TestDevice, TestDevice) {
        let a = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: subject)))
        let b = try await TestDevice(baseURL: url, credentials: .jwt(testJWT(subject: subject)))
        try await a.subscribe("complexity <= 4")
        try await b.subscribe("complexity <= 4")
        return (a, b)
    }

    @Test func aCreateAndSetsInOneTransactionKeepTheLastValues() async throws {
        try await SyncTestServer.withServer { url in
            let (a, b) = try await Self.pair(url, "order-create-\(UInt32.random(in: 0...UInt32.max))")
            defer { a.close(); b.close() }
            let id = ObjectId.generate()
            try a.write { db in
                try db.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(a.user.id)), (2, .string("draft")), (3, .int(1))])
                try db.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("final"))
                try db.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(3))
            }
            try await a.sync()
            try await b.sync()
            for d in [a, b] {
                #expect(try d.item(id)?[2] == .string("final"))
                #expect(try d.item(id)?[3] == .int(3))
            }
            #expect(a.errors.all.isEmpty && b.errors.all.isEmpty)
        }
    }

    @Test func aFieldSetTwiceInOneTransactionKeepsTheSecondValue() async throws {
        try await SyncTestServer.withServer { url in
            let (a, b) = try await Self.pair(url, "order-set-\(UInt32.random(in: 0...UInt32.max))")
            defer { a.close(); b.close() }
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "start", complexity: 1)
            try await a.sync()
            try await b.sync()
            try b.write { db in
                try db.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("one"))
                try db.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("two"))
                try db.addInteger(classIndex: 0, key: .objectId(id), property: 3, delta: 1)
                try db.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(4))
            }
            try await b.sync()
            try await a.sync()
            for d in [a, b] {
                #expect(try d.item(id)?[2] == .string("two"))
                #expect(try d.item(id)?[3] == .int(4))
            }
            #expect(a.errors.all.isEmpty && b.errors.all.isEmpty)
        }
    }

    /// A changeset stamped ten years ahead (a broken clock, or a hostile device of the same
    /// user), then an edit of the same field by a device that downloaded it: the edit wins on
    /// every device, the one that made the broken write included.
    @Test func aLaterEditWinsOverAWriteStampedYearsAhead() async throws {
        try await SyncTestServer.withServer { url in
            let subject = "clock-later-\(UInt32.random(in: 0...UInt32.max))"
            let (a, b) = try await Self.pair(url, subject)
            defer { a.close(); b.close() }
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "start", complexity: 1)
            try await a.sync()
            try await RawSyncDevice.with(count: 1, baseURL: url, accessToken: a.user.accessToken) { raw in
                let broken = raw[0]
                let base = try await broken.bind(query: "complexity <= 4")
                try await broken.upload(clientVersion: 1, base: base, timestamp: RawSyncDevice.yearsAhead(10),
                                        [.set(table: "Item", key: .objectId(id), field: "itemName", value: .string("from the future"))])
                try await b.sync()
                #expect(try b.item(id)?[2] == .string("from the future"))
                try b.write { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("later")) }
                try await b.sync()
                try await a.sync()
                for d in [a, b] { #expect(try d.item(id)?[2] == .string("later")) }
                // The device with the broken clock is sent the edit too.
                try await broken.waitForObject(.objectId(id)) { $0.first { $0.name == "itemName" }?.value == .string("later") }
            }
            #expect(a.errors.all.isEmpty && b.errors.all.isEmpty)
        }
    }

    /// Two concurrent writes (neither writer had seen the other's), both stamped in the future:
    /// the server counts each at its own clock (plus the allowed skew), so the one it received
    /// later wins although its stamp is earlier. Without the bound the far stamp wins for ever.
    @Test func stampsAheadOfTheServersClockCountAsItsClock() async throws {
        try await SyncTestServer.withServer { url in
            let subject = "clock-bound-\(UInt32.random(in: 0...UInt32.max))"
            let (a, b) = try await Self.pair(url, subject)
            defer { a.close(); b.close() }
            let id = ObjectId.generate()
            try a.createItem(id, owner: a.user.id, name: "start", complexity: 1)
            try await a.sync()
            try await RawSyncDevice.with(count: 2, baseURL: url, accessToken: a.user.accessToken) { raw in
                let base = try await raw[0].bind(query: "complexity <= 4")
                _ = try await raw[1].bind(query: "complexity <= 4")
                try await raw[0].upload(clientVersion: 1, base: base, timestamp: RawSyncDevice.yearsAhead(20),
                                        [.set(table: "Item", key: .objectId(id), field: "itemName", value: .string("twenty years ahead"))])
                // The same base: the second writer had not seen the first write.
                try await raw[1].upload(clientVersion: 1, base: base, timestamp: RawSyncDevice.yearsAhead(10),
                                        [.set(table: "Item", key: .objectId(id), field: "itemName", value: .string("ten years ahead"))])
            }
            try await a.sync()
            try await b.sync()
            for d in [a, b] { #expect(try d.item(id)?[2] == .string("ten years ahead")) }
        }
    }
}

/// A device that speaks docs/protocol.md itself over a WebSocket, to send what the engine never
/// would: a changeset stamped by a broken clock.
struct RawSyncDevice: Sendable {
    let socket: TestWebSocket
    static let session: UInt64 = 1

    static func yearsAhead(_ years: Int64) -> Int64 {
        Int64(Date().timeIntervalSince1970 * 1e9) + years * 365 * 86_400 * 1_000_000_000
    }

    /// `count` raw devices of the user with `accessToken`, connected for the time of `body`.
    static func with(count: Int, baseURL: String, appId: String = "item-app-seeds", accessToken: String,
                     _ body: ([RawSyncDevice]) async throws -> Void) async throws {
        let loop = try TestLoop()
        defer { loop.release() }
        let ws = baseURL.replacingOccurrences(of: "http://", with: "ws://") + "/api/client/v2.0/app/\(appId)/realm-sync"
        var devices: [RawSyncDevice] = []
        for _ in 0..<count {
            devices.append(RawSyncDevice(socket: await TestWebSocket(loop: loop, url: ws, subprotocol: "ferry-sync.1",
                                                                     headers: [("Authorization", "Bearer \(accessToken)")])))
        }
        var failure: Error?
        do {
            for d in devices {
                guard case .open = await d.socket.recorder.next(seconds: 60) else { throw FerryError(.network, "the sync WebSocket did not open") }
            }
            try await body(devices)
        } catch { failure = error }
        for d in devices {
            await d.socket.close()
            await d.socket.release()
        }
        if let failure { throw failure }
    }

    func send(_ m: ProtocolMessage) async throws {
        guard await socket.send(ProtocolCodec.encode(m)) else { throw FerryError(.network, "send failed") }
    }

    /// The next message from the server; an ERROR is thrown.
    func next() async throws -> ProtocolMessage {
        guard let event = await socket.recorder.next(seconds: 60) else { throw FerryError(.timeout, "no message from the server") }
        guard case .message(let bytes) = event else { throw FerryError(.network, "the server closed the connection: \(event)") }
        let m = try ProtocolCodec.decode(bytes)
        if case .error(let e) = m { throw FerryError(.internal, "ERROR \(e.code): \(e.message)") }
        return m
    }

    /// Binds a new file with one subscription and takes its bootstrap; returns its server version.
    func bind(query: String) async throws -> UInt64 {
        try await send(.bind(session: Self.session, database: "raw", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0))
        guard case .ident = try await next() else { throw FerryError(.internal, "no IDENT") }
        try await send(.query(session: Self.session, version: 1, subscriptions: [Subscription(name: "items", objectType: "Item", query: query)]))
        while true {
            if case let .download(_, version, _, subscriptionVersion, _, last, _) = try await next(), last, subscriptionVersion == 1 { return version }
        }
    }

    /// Uploads one changeset and waits for its acknowledgement.
    func upload(clientVersion: UInt64, base: UInt64, timestamp: Int64, _ instructions: [Instruction]) async throws {
        let bytes = ChangesetCodec.encode(Changeset(timestamp: timestamp, instructions: instructions))
        try await send(.upload(session: Self.session, changesets: [UploadChangeset(clientVersion: clientVersion, lastIntegratedServerVersion: base, changeset: bytes)]))
        while true {
            if case let .download(_, _, acknowledged, _, _, _, _) = try await next(), acknowledged >= clientVersion { return }
        }
    }

    /// Reads downloads until one carries the object `key` in a state that `matches`.
    func waitForObject(_ key: FerryValue, _ matches: ([FieldValue]) -> Bool) async throws {
        while true {
            guard case let .download(_, _, _, _, _, _, changesets) = try await next() else { continue }
            for c in changesets {
                for i in try ChangesetCodec.decode(c.changeset).instructions {
                    if case let .create(_, k, fields) = i, k == key, matches(fields) { return }
                }
            }
        }
    }
}
