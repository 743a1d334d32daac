import FerryClient
import FerryCore
import FerryStore
import Foundation
import Testing

/// SPEC F-PRECHECK with a real server: it publishes the user's write rules to each session;
/// the device checks every commit before upload, offline too, and warns or refuses with the
/// seeds' exact strings; the rules survive a restart in the file.
@Suite("Pre-flight check", .serialized)
struct PrecheckTests {
    static let wrongOwner = "This string does not match the user.id"

    static func outsideView(_ id: ObjectId) -> String {
        "write to \"\(id.hexString)\" in table \"Item\" not allowed; object is outside of the current query view"
    }

    static func denied(_ id: ObjectId) -> String {
        "write to \"\(id.hexString)\" in table \"Item\" was denied by write filter in role \"owner-read-write\""
    }

    /// A synced open of the seeds' Item file with a pre-flight check, for a user (cached in
    /// `dir` by an earlier login: the open works offline).
    static func open(_ app: App, _ user: SyncUser, dir: String, mode: PrecheckMode, findings: Findings) throws -> SyncSession {
        var options = SyncOpenOptions()
        options.precheckMode = mode
        options.precheckHandler = { rejected, committed in findings.add(rejected, committed) }
        return try app.openSynced(user: user, path: dir + "/items.ferry", schema: itemSchema, options: options)
    }

    static func login(_ app: App) async throws -> SyncUser {
        let login = Arrival<Result<SyncUser, FerryError>>()
        app.login(.anonymous) { login.deliver($0) }
        guard let result = await login.wait(seconds: 60) else { throw FerryError(.timeout, "login timed out") }
        return try result.get()
    }

    static func create(_ db: Database, _ id: ObjectId, owner: String, complexity: Int64) throws {
        try db.beginWrite()
        do {
            try db.create(classIndex: 0, values: [(0, .objectId(id)), (1, .string(owner)), (2, .string("item")), (3, .int(complexity))])
            try db.commit()
        } catch {
            if db.isInTransaction { try? db.cancel() }
            throw error
        }
    }

    /// Connects once (the server publishes the rules after BIND, before it answers the
    /// subscription), then goes offline.
    static func subscribeThenGoOffline(_ session: SyncSession) async throws {
        let v = try session.updateSubscriptions { $0.add(name: "items", objectType: "Item", query: "complexity <= 4") }
        let done = Arrival<FerryError?>()
        session.waitForSubscriptions(version: v) { done.deliver($0) }
        guard let r = await done.wait(seconds: 60) else { throw FerryError(.timeout, "subscription wait timed out") }
        if let e = r { throw e }
        session.suspend()
    }

    @Test func warnModeCommitsAndReportsTheSeedsWritesAtOnceOffline() async throws {
        try await SyncTestServer.withServer { url in
            let dir = SyncTestServer.temporaryDirectory("precheck-warn")
            let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .warn))
            let errors = ErrorLog()
            app.errorHandler = { _, e in errors.add(e) }
            defer { app.close() }
            let user = try await Self.login(app)
            let findings = Findings()
            let session = try Self.open(app, user, dir: dir, mode: .warn, findings: findings)
            defer { session.close() }
            try await Self.subscribeThenGoOffline(session)
            let rules = try #require(try session.writeRules()?.rules(for: "Item"))
            #expect(rules.role?.name == "owner-read-write")
            #expect(rules.role?.writeFilter == .field("ownerId", .equal(.value(.string(user.id)))))
            #expect(Set(rules.queryableFields) == ["_id", "complexity", "ownerId"])

            let complex = ObjectId.generate(), foreign = ObjectId.generate(), fine = ObjectId.generate()
            try Self.create(session.database, complex, owner: user.id, complexity: 7)
            // Reported before the commit returned, offline: no waiting.
            #expect(findings.all.count == 1)
            #expect(findings.all.first?.committed == true)
            #expect(findings.all.first?.writes == [.outsideView(objectType: "Item", primaryKey: .objectId(complex))])
            #expect(findings.all.first?.writes.first?.reason == Self.outsideView(complex))
            try Self.create(session.database, foreign, owner: Self.wrongOwner, complexity: 1)
            #expect(findings.all.count == 2)
            #expect(findings.all.last?.writes.map(\.reason) == [Self.denied(foreign)])
            try Self.create(session.database, fine, owner: user.id, complexity: 2)
            #expect(findings.all.count == 2)
            // Warn mode commits: the writes are local until the server reverts them.
            #expect(try session.database.object(classIndex: 0, key: .objectId(complex)) != nil)
            #expect(try session.database.object(classIndex: 0, key: .objectId(foreign)) != nil)

            // The server stays the authority: back online, it compensates the same two.
            session.resume()
            // (One ERROR per upload message: both may come in one, or in two.)
            var reverted = await errors.wait(count: 1, seconds: 60)
            if reverted.flatMap(\.compensatingWrites).count < 2 { reverted = await errors.wait(count: 2, seconds: 60) }
            #expect(Set(reverted.flatMap(\.compensatingWrites).map(\.reason)) == [Self.outsideView(complex), Self.denied(foreign)])
        }
    }

    @Test func strictModeRefusesTheSeedsWritesOfflineAndWritesNothing() async throws {
        try await SyncTestServer.withServer { url in
            let dir = SyncTestServer.temporaryDirectory("precheck-strict")
            let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .warn))
            defer { app.close() }
            let user = try await Self.login(app)
            let findings = Findings()
            let session = try Self.open(app, user, dir: dir, mode: .strict, findings: findings)
            defer { session.close() }
            try await Self.subscribeThenGoOffline(session)
            let db = session.database
            let before = try db.latestLocalVersion()

            let complex = ObjectId.generate(), foreign = ObjectId.generate(), fine = ObjectId.generate()
            let e1 = try #require(throws: FerryError.self) { try Self.create(db, complex, owner: user.id, complexity: 7) }
            #expect(e1.code == .writeRejected)
            #expect(e1.message.contains(Self.outsideView(complex)))
            let e2 = try #require(throws: FerryError.self) { try Self.create(db, foreign, owner: Self.wrongOwner, complexity: 1) }
            #expect(e2.code == .writeRejected)
            #expect(e2.message.contains(Self.denied(foreign)))
            #expect(findings.all.map(\.committed) == [false, false])
            #expect(findings.all.map { $0.writes.map(\.reason) } == [[Self.outsideView(complex)], [Self.denied(foreign)]])
            // Nothing written: no objects, no history; the transaction is over.
            #expect(try db.object(classIndex: 0, key: .objectId(complex)) == nil)
            #expect(try db.object(classIndex: 0, key: .objectId(foreign)) == nil)
            #expect(try db.latestLocalVersion() == before)
            #expect(!db.isInTransaction)
            // An update that moves an object out of the view is refused too; legal writes pass.
            try Self.create(db, fine, owner: user.id, complexity: 2)
            try db.beginWrite()
            try db.set(classIndex: 0, key: .objectId(fine), property: 3, value: .int(9))
            #expect(throws: FerryError.self) { try db.commit() }
            #expect(try db.object(classIndex: 0, key: .objectId(fine))?[3] == .int(2))
            #expect(findings.all.count == 3)
        }
    }

    /// Only a client that lists `write-rules` in `X-Ferry-Features` gets WRITE_RULES: an older
    /// client, whose decoder refuses unknown message types, never sees one.
    @Test func onlyClientsThatAskGetTheRules() async throws {
        try await SyncTestServer.withServer { url in
            let user = try await RawSyncClient.anonymousUser(url)
            for features in [nil, "receipts, write-rules"] {
                try await RawSyncClient.connect(url, token: user.token, features: features) { client in
                    try await client.send(.bind(session: 1, database: "raw", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0))
                    try await client.send(.mark(session: 1, request: 7))
                    var rules: WriteRules?
                    while let m = await client.next(seconds: 30) {
                        if case .writeRules(1, let r) = m { rules = r }
                        if case .mark(1, 7) = m { break }
                    }
                    if features == nil {
                        #expect(rules == nil)
                    } else {
                        let item = try #require(rules?.rules(for: "Item"))
                        #expect(item.role?.writeFilter == .field("ownerId", .equal(.value(.string(user.userId)))))
                        #expect(item.role?.write == true && item.role?.insert == true && item.role?.delete == true)
                        #expect(item.role?.name == "owner-read-write")
                    }
                }
            }
        }
    }

    /// The rules live in the file: after a restart with no server, the check still knows the
    /// role. A file that never met a server checks the subscriptions only.
    @Test func theRulesSurviveARestartOffline() async throws {
        let dir = SyncTestServer.temporaryDirectory("precheck-restart")
        let userId = Locked<String>("")
        try await SyncTestServer.withServer { url in
            let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: url, baseDirectory: dir, logLevel: .warn))
            defer { app.close() }
            let user = try await Self.login(app)
            userId.set(user.id)
            let session = try Self.open(app, user, dir: dir, mode: .off, findings: Findings())
            try await Self.subscribeThenGoOffline(session)
            #expect(try session.writeRules() != nil)
            session.close()
        }
        // The server is gone. A new App on the same directory: the cached user, the stored rules.
        let app = try App(App.Configuration(appId: "item-app-seeds", baseURL: "http://127.0.0.1:9", baseDirectory: dir, logLevel: .off))
        defer { app.close() }
        let user = try #require(app.currentUser)
        #expect(user.id == userId.get())
        let findings = Findings()
        let session = try Self.open(app, user, dir: dir, mode: .strict, findings: findings)
        defer { session.close() }
        let foreign = ObjectId.generate()
        let e = try #require(throws: FerryError.self) { try Self.create(session.database, foreign, owner: Self.wrongOwner, complexity: 1) }
        #expect(e.code == .writeRejected)
        #expect(findings.all.first?.writes.map(\.reason) == [Self.denied(foreign)])
        try Self.create(session.database, ObjectId.generate(), owner: user.id, complexity: 1)

        // A file of the same user that never met a server: only the subscriptions are checked.
        let neverFindings = Findings()
        var never = SyncOpenOptions()
        never.precheckMode = .strict
        never.precheckHandler = { w, c in neverFindings.add(w, c) }
        let fresh = try app.openSynced(user: user, path: dir + "/never.ferry", schema: itemSchema, options: never)
        defer { fresh.close() }
        _ = try fresh.updateSubscriptions { $0.add(name: "items", objectType: "Item", query: "complexity <= 4") }
        #expect(try fresh.writeRules() == nil)
        try Self.create(fresh.database, ObjectId.generate(), owner: Self.wrongOwner, complexity: 1)
        #expect(neverFindings.all.isEmpty)
        let complex = ObjectId.generate()
        #expect(throws: FerryError.self) { try Self.create(fresh.database, complex, owner: user.id, complexity: 7) }
        #expect(neverFindings.all.first?.writes.map(\.reason) == [Self.outsideView(complex)])
    }
}

/// What the precheck handler received, in order.
final class Findings: @unchecked Sendable {
    private let lock = ThreadLock()
    private var items: [(writes: [CompensatingWrite], committed: Bool)] = []
    func add(_ writes: [CompensatingWrite], _ committed: Bool) { lock.withLock { items.append((writes, committed)) } }
    var all: [(writes: [CompensatingWrite], committed: Bool)] { lock.withLock { items } }
}

final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = ThreadLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ v: Value) { lock.withLock { value = v } }
}
