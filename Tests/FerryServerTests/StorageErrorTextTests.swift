import FerryAppConfig
import FerryCore
@testable import FerryServer
import FerrySyncStorage
import Foundation
import Logging
import Synchronization
import Testing

/// Issue 22, point 8: a storage error names tables, paths, hosts and SQL. A device whose
/// message met one is told only that the store cannot be reached, with an error id; the
/// details go to the server's log under the same id.
@Suite("Server: storage error texts stay in the log")
struct StorageErrorTextTests {
    /// The real store, except that creating a client file fails with a revealing error.
    final class FailingClientFiles: SyncStorage, @unchecked Sendable {
        let base: any SyncStorage
        static let secret = "disk I/O error in /srv/ferry-private/sync.sqlite, table client_files"
        init(_ base: any SyncStorage) { self.base = base }
        var description: String { base.description }
        var changeFeed: any ChangeFeed { base.changeFeed }
        func syncState() async throws -> SyncState { try await base.syncState() }
        func setSyncEnabled(_ enabled: Bool) async throws -> SyncState { try await base.setSyncEnabled(enabled) }
        func setSyncPaused(_ paused: Bool) async throws -> SyncState { try await base.setSyncPaused(paused) }
        func bumpStateRevision() async throws { try await base.bumpStateRevision() }
        func sharedSecret(named name: String, create: @Sendable () -> [UInt8]) async throws -> [UInt8] { try await base.sharedSecret(named: name, create: create) }
        func newClientFile(userId: String) async throws -> ClientFileRecord { throw FerryError(.io, Self.secret) }
        func clientFile(_ ident: UInt64) async throws -> ClientFileRecord? { try await base.clientFile(ident) }
        func saveSubscriptions(clientFile: UInt64, version: UInt64, subscriptions: [Subscription]) async throws {
            try await base.saveSubscriptions(clientFile: clientFile, version: version, subscriptions: subscriptions)
        }
        func clientFileCount(userId: String) async throws -> Int { try await base.clientFileCount(userId: userId) }
        func forgetLeastRecentClientFile(userId: String) async throws { try await base.forgetLeastRecentClientFile(userId: userId) }
        func forgetClientFile(_ ident: UInt64) async throws { try await base.forgetClientFile(ident) }
        func touchClientFile(_ ident: UInt64, at secondsSinceEpoch: Int) async throws { try await base.touchClientFile(ident, at: secondsSinceEpoch) }
        func forgetAnsweredRefusals(clientFile ident: UInt64, answeredThrough: UInt64) async throws {
            try await base.forgetAnsweredRefusals(clientFile: ident, answeredThrough: answeredThrough)
        }
        func clientFileBound(_ ident: UInt64, at secondsSinceEpoch: Int, serverVersion: UInt64) async throws {
            try await base.clientFileBound(ident, at: secondsSinceEpoch, serverVersion: serverVersion)
        }
        func oldestBoundVersion() async throws -> UInt64? { try await base.oldestBoundVersion() }
        func writeTransaction<T: Sendable>(_ body: @Sendable (any SyncWriteTransaction) async throws -> T) async throws -> T { try await base.writeTransaction(body) }
        func object(_ key: ObjectKey, schema: ObjectSchema) async throws -> StoredObject? { try await base.object(key, schema: schema) }
        func objects(_ keys: [ObjectKey], schema: Schema) async throws -> [ObjectKey: StoredObject] { try await base.objects(keys, schema: schema) }
        func changes(since version: UInt64, schema: ObjectSchema, _ body: (ChangedObject) throws -> Void) async throws {
            try await base.changes(since: version, schema: schema, body)
        }
        func withSnapshot<T: Sendable>(_ body: @Sendable (any SyncSnapshot) async throws -> T) async throws -> T { try await base.withSnapshot(body) }
        func close() async { await base.close() }
    }

    @Test func aDeviceGetsAnErrorIdAndTheLogGetsTheDetails() async throws {
        let config = ServerConfiguration(appDirectory: AuthAPITests.example,
                                         dataDirectory: NSTemporaryDirectory() + "ferry-error-text-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(atPath: config.dataDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: config.dataDirectory) }
        var quiet = Logger(label: "error-text-store")
        quiet.logLevel = .critical
        let store = try await ServerStore.open(config, logger: quiet)
        let metrics = ServerMetrics()
        let syncLog = SyncLogRecorder(node: "t", storage: store.operations, retention: config.syncLogRetention, metrics: metrics, logger: quiet)
        let writer = Task { await syncLog.run() }
        defer { writer.cancel() }
        let telemetry = SyncTelemetry(node: "t", metrics: metrics, live: LiveConnections(), log: syncLog)
        let shared = SharedLines()
        let hubLogger = Logger(label: "error-text-hub") { _ in SharedCapture(sink: shared) }
        let hub = try await SyncHub(app: try AppDirectory.load(config.appDirectory), storage: FailingClientFiles(store.sync), directory: store.users,
                                    logger: hubLogger, events: ServerEventLog(), limits: SyncLimits(), telemetry: telemetry)
        let outbox = await hub.openConnection(user: UserContext(id: "someone"))
        await hub.receive(.bind(session: 1, database: "d", clientFileIdent: 0, clientFileSalt: 0, lastServerVersion: 0), from: outbox)
        var received: [ProtocolMessage] = []
        while let frame = await outbox.next() { received.append(try ProtocolCodec.decode(frame)) }
        guard case .error(let e)? = received.first else {
            Issue.record("no ERROR: \(received)")
            return
        }
        #expect(e.code == ProtocolError.Code.storageUnavailable && e.tryAgain)
        #expect(!e.message.contains("/srv/ferry-private") && !e.message.contains("client_files"), "\(e.message)")
        let id = try #require(e.message.firstRange(of: /error id ([0-9a-f]{16})/).map { String(e.message[$0].suffix(16)) }, "\(e.message)")
        #expect(shared.all.contains { $0.contains(id) && $0.contains(FailingClientFiles.secret) }, "\(shared.all)")
    }
}

/// Log lines shared between the handler's copies (a `Logger` copies its handler).
final class SharedLines: Sendable {
    private let lines = Mutex<[String]>([])
    func add(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

struct SharedCapture: LogHandler {
    let sink: SharedLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        sink.add("\(level) \(message)")
    }
}
