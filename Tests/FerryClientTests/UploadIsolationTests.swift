import FerryClient
import FerryCore
@testable import FerryServer
import Foundation
import Testing

/// Issue 13, point 3: an upload is merged and validated outside the app's write lock, beside
/// other users' uploads; only the ordering of the history is serialised. The server awaits
/// `ServerConfiguration.beforeUploadMerge` between an upload's reads and its merge, so a test
/// can hold one user's merge there for as long as it likes.
@Suite struct UploadIsolationTests {
    /// A merge held for ever would hold every other user's upload if merges ran under the
    /// write lock (as they did before): here another user's upload is acknowledged, and
    /// delivered, while it is held.
    @Test func aHeldMergeHoldsUpNoOtherUsersUpload() async throws {
        let gate = MergeGate()
        let email = "held-\(UInt64.random(in: 0...UInt64.max))@example.com"
        try await SyncTestServer.withServer(configure: { $0.beforeUploadMerge = { await gate.pass($0) }; $0.syncLimits.premergeFromInstructions = 1 }) { url in
            let held = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"),
                                            register: (email, "password123"))
            defer { held.close() }
            let other = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { other.close() }
            try await held.subscribe("ownerId == \"\(held.user.id)\"")
            try await other.subscribe("ownerId == \"\(other.user.id)\"")
            await gate.holdNext(of: held.user.id)
            let heldItem = ObjectId.generate(), otherItem = ObjectId.generate()
            try held.createItem(heldItem, owner: held.user.id, name: "held", complexity: 1)
            #expect(await gate.waitUntilHolding(seconds: 60), "the held user's upload never reached its merge")

            try await gate.releasingOnError {
                try other.createItem(otherItem, owner: other.user.id, name: "not held up", complexity: 2)
                try await other.waitUpload()
            }
            #expect(await gate.isHolding, "the held merge was let go before the other user's upload was acknowledged")

            await gate.release()
            try await held.waitUpload()
            // The server holds what the held user's host wrote: another device of it downloads it.
            let copy = try await TestDevice.fresh(url, credentials: .emailPassword(email: email, password: "password123"),
                                                  query: "ownerId == \"\(held.user.id)\"")
            defer { copy.close() }
            #expect(try copy.allItems().count == 1)
            #expect(try copy.item(heldItem)?[2] == .string("held"))
            #expect(try copy.item(heldItem)?[3] == .int(1))
        }
    }

    /// An upload whose objects another upload changed between its read and its commit is
    /// merged again: both devices' writes to one object survive. A commit of the stale merge
    /// would write the object as it was before the other device's change (its name lost).
    @Test func aMergeWhoseObjectMovedIsMergedAgain() async throws {
        let gate = MergeGate()
        let email = "isolation-\(UInt64.random(in: 0...UInt64.max))@example.com"
        try await SyncTestServer.withServer(configure: { $0.beforeUploadMerge = { await gate.pass($0) }; $0.syncLimits.premergeFromInstructions = 1 }) { url in
            let first = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"),
                                             register: (email, "password123"))
            defer { first.close() }
            let second = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"))
            defer { second.close() }
            let query = "ownerId == \"\(first.user.id)\""
            try await first.subscribe(query)
            try await second.subscribe(query)
            let id = ObjectId.generate()
            try first.createItem(id, owner: first.user.id, name: "created", complexity: 1)
            try await first.waitUpload()
            try await second.waitDownload()
            #expect(try second.item(id) != nil)

            // The first device's change to the complexity is held after its read ...
            let callsBefore = await gate.calls(of: first.user.id)
            await gate.holdNext(of: first.user.id)
            try first.write { try $0.set(classIndex: 0, key: .objectId(id), property: 3, value: .int(4)) }
            #expect(await gate.waitUntilHolding(seconds: 60))
            // ... while the second device's change to the name commits.
            try await gate.releasingOnError {
                try second.write { try $0.set(classIndex: 0, key: .objectId(id), property: 2, value: .string("renamed")) }
                try await second.waitUpload()
            }
            await gate.release()
            try await first.waitUpload()
            // Merged three times at least: the second device's once, the first device's twice.
            #expect(await gate.calls(of: first.user.id) - callsBefore >= 3)

            let check = try await TestDevice.fresh(url, credentials: .emailPassword(email: email, password: "password123"), query: query)
            defer { check.close() }
            let values = try check.item(id)
            #expect(values?[2] == .string("renamed"), "the second device's name was lost")
            #expect(values?[3] == .int(4), "the first device's complexity was lost")
            for device in [first, second] {
                try await device.sync()
                #expect(try device.item(id) == values)
            }
        }
    }
}

extension UploadIsolationTests {
    /// With the default threshold, an upload of one object is merged under the lock (its merge
    /// costs less than the read outside it would), and one of many objects outside it.
    @Test func onlyLargeUploadsAreMergedOutsideTheLock() async throws {
        let gate = MergeGate()
        try await SyncTestServer.withServer(configure: { $0.beforeUploadMerge = { await gate.pass($0) } }) { url in
            let device = try await TestDevice(baseURL: url, credentials: .anonymous)
            defer { device.close() }
            try await device.subscribe("ownerId == \"\(device.user.id)\"")
            try device.createItem(ObjectId.generate(), owner: device.user.id, name: "one", complexity: 1)
            try await device.waitUpload()
            #expect(await gate.calls(of: device.user.id) == 0, "a one-object upload was merged outside the lock")
            let many = SyncLimits().premergeFromInstructions
            try device.write { db in
                for n in 0..<many {
                    try db.create(classIndex: 0, values: [(0, .objectId(ObjectId.generate())), (1, .string(device.user.id)), (2, .string("item \(n)")), (3, .int(1))])
                }
            }
            try await device.waitUpload()
            #expect(await gate.calls(of: device.user.id) >= 1, "a \(many)-object upload was merged under the lock")
            #expect(try device.allItems().count == many + 1)
        }
    }
}

/// Holds the next merge of one user at `ServerConfiguration.beforeUploadMerge` until released,
/// and counts every user's merges.
actor MergeGate {
    private var heldUser: String?
    private var holding: CheckedContinuation<Void, Never>?
    private var holdingWaiters: [CheckedContinuation<Void, Never>] = []
    private var counts: [String: Int] = [:]

    func holdNext(of userId: String) { heldUser = userId }

    func pass(_ userId: String) async {
        counts[userId, default: 0] += 1
        guard userId == heldUser else { return }
        heldUser = nil
        await withCheckedContinuation { c in
            holding = c
            for w in holdingWaiters { w.resume() }
            holdingWaiters = []
        }
    }

    var isHolding: Bool { holding != nil }

    func calls(of userId: String) -> Int { counts[userId] ?? 0 }

    func release() {
        holding?.resume()
        holding = nil
    }

    /// Runs `body`; if it throws, lets the held merge go first (a server cannot stop while a
    /// merge is held).
    func releasingOnError(_ body: () async throws -> Void) async throws {
        do { try await body() } catch {
            release()
            throw error
        }
    }

    /// Whether a merge is held, waiting up to `seconds` for one.
    func waitUntilHolding(seconds: Double) async -> Bool {
        if holding != nil { return true }
        let timeout = Task { [weak self] in
            guard (try? await Task.sleep(for: .seconds(seconds))) != nil else { return }
            await self?.expireWaiters()
        }
        defer { timeout.cancel() }
        await withCheckedContinuation { holdingWaiters.append($0) }
        return holding != nil
    }

    private func expireWaiters() {
        for w in holdingWaiters { w.resume() }
        holdingWaiters = []
    }
}

extension TestDevice {
    /// A new device logged in with `credentials`, subscribed to `query`, with its bootstrap.
    static func fresh(_ url: String, credentials: Credentials, query: String) async throws -> TestDevice {
        let d = try await TestDevice(baseURL: url, credentials: credentials)
        do {
            try await d.subscribe(query)
            try await d.waitDownload()
        } catch {
            d.close()
            throw error
        }
        return d
    }
}

/// A commit that concerns many sessions at once is fanned out on every core
/// (`FanOutEncoding`, from `parallelFrom` sessions on): every one of them gets the object,
/// exactly as its host wrote it, and nothing else.
@Suite struct WideFanOutTests {
    @Test func aCommitReachesEverySessionOfAWideFanOut() async throws {
        let email = "wide-\(UInt64.random(in: 0...UInt64.max))@example.com"
        let sessions = UInt64(FanOutEncoding.parallelFrom + 16)
        try await SyncTestServer.withServer { url in
            let writer = try await TestDevice(baseURL: url, credentials: .emailPassword(email: email, password: "password123"),
                                              register: (email, "password123"))
            defer { writer.close() }
            let query = "ownerId == \"\(writer.user.id)\""
            try await writer.subscribe(query)
            try await RawSyncClient.connect(url, token: writer.user.accessToken) { client in
                for s in 1...sessions {
                    _ = try await HostileSyncTests.newClientFile(client, session: s)
                    try await client.send(.query(session: s, version: 1, subscriptions: [Subscription(name: "items", objectType: "Item", query: query)]))
                    #expect(try await HostileSyncTests.downloadedKeys(client, session: s).isEmpty)
                }
                let id = ObjectId.generate()
                try writer.createItem(id, owner: writer.user.id, name: "to everyone", complexity: 3)
                try await writer.waitUpload()
                var reached: Set<UInt64> = []
                while reached.count < sessions {
                    guard let m = await client.next(seconds: 60) else { Issue.record("only \(reached.count) of \(sessions) sessions got the object"); return }
                    guard case let .download(s, _, _, _, _, _, changesets) = m, !changesets.isEmpty else { continue }
                    let instructions = try changesets.flatMap { try ChangesetCodec.decode($0.changeset).instructions }
                    #expect(instructions.count == 1)
                    guard case let .create(_, key, fields)? = instructions.first else { Issue.record("session \(s) got \(instructions)"); continue }
                    #expect(key == .objectId(id))
                    #expect(fields.contains(FieldValue(name: "itemName", value: .string("to everyone"))))
                    #expect(fields.contains(FieldValue(name: "complexity", value: .int(3))))
                    #expect(reached.insert(s).inserted, "session \(s) got the object twice")
                }
            }
        }
    }
}
