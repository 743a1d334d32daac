import FerryCore
import FerrySyncStorage
import Foundation

/// What the sync path reports to operators, in one place the hub and the sockets call: the
/// metrics, this node's live connections and the per-user sync log. Every call returns at
/// once (locks held briefly, the log queued), so reporting never slows sync.
struct SyncTelemetry: Sendable {
    let node: String
    let metrics: ServerMetrics
    let live: LiveConnections
    let log: SyncLogRecorder?

    /// Reporting that goes nowhere durable (hubs built by tests without a server).
    static func detached() -> SyncTelemetry { SyncTelemetry(node: "local", metrics: ServerMetrics(), live: LiveConnections(), log: nil) }

    // MARK: Connections

    func connectionOpened(_ outbox: ConnectionOutbox, sdk: String?) {
        live.opened(outbox.id, userId: outbox.userId, sdk: sdk, atMilliseconds: SyncLogRecorder.nowMilliseconds())
        log?.record(.connectionOpened, userId: outbox.userId, connection: outbox.id, "connection opened" + (sdk.map { " by \($0)" } ?? ""),
                    details: [("sdk", sdk.map(StoredJSON.string) ?? .null)])
    }

    func connectionClosed(_ outbox: ConnectionOutbox, reason: String) {
        let c = live.connection(outbox.id)
        live.closed(outbox.id)
        log?.record(.connectionClosed, userId: outbox.userId, connection: outbox.id, "connection closed: \(reason)",
                    details: [("reason", .string(reason)), ("bytes_up", .int(Int64(c?.bytesUp ?? 0))), ("bytes_down", .int(Int64(c?.bytesDown ?? 0)))])
    }

    func received(_ outbox: ConnectionOutbox, bytes: Int) {
        metrics.received(bytes: bytes)
        live.received(outbox.id, bytes: bytes)
    }

    func sent(_ outbox: ConnectionOutbox, bytes: Int) {
        metrics.sent(bytes: bytes)
        live.sent(outbox.id, bytes: bytes)
    }

    // MARK: Sessions

    func sessionBound(_ outbox: ConnectionOutbox, session: UInt64, clientFile: UInt64, newFile: Bool, serverVersion: UInt64) {
        live.sessionBound(outbox.id, session: session, clientFile: clientFile)
        log?.record(.sessionBound, userId: outbox.userId, connection: outbox.id,
                    "session \(session) bound to \(newFile ? "new " : "")client file \(clientFile)",
                    details: [("session", .int(Int64(session))), ("client_file", .int(Int64(clientFile))), ("new_client_file", .bool(newFile)),
                              ("server_version", .int(Int64(clamping: serverVersion)))])
    }

    func sessionUnbound(_ outbox: ConnectionOutbox, session: UInt64, reason: String) {
        live.sessionUnbound(outbox.id, session: session)
        log?.record(.sessionUnbound, userId: outbox.userId, connection: outbox.id, "session \(session) unbound: \(reason)",
                    details: [("session", .int(Int64(session))), ("reason", .string(reason))])
    }

    /// A new subscription set is being evaluated (its bootstrap follows).
    func subscriptionStarted(_ outbox: ConnectionOutbox, session: UInt64) { live.session(outbox.id, session, is: .bootstrapping) }

    /// The outcome of a subscription set: `error` nil when its bootstrap was sent.
    func subscriptionChanged(_ outbox: ConnectionOutbox, session: UInt64, version: UInt64, subscriptions: [Subscription], error: String?,
                             started: ContinuousClock.Instant) {
        live.session(outbox.id, session, is: .active)
        if error == nil { metrics.bootstrap(since: started) }
        // Bounded: a client chooses how many subscriptions it sends and how long they are.
        var queries = subscriptions.prefix(Self.maxListed).map {
            StoredJSON.object([("name", .string(excerpt($0.name))), ("object_type", .string(excerpt($0.objectType))),
                               ("query", .string(excerpt($0.query, limit: 1000)))])
        }
        if subscriptions.count > Self.maxListed { queries.append(.object([("more", .int(Int64(subscriptions.count - Self.maxListed)))])) }
        log?.record(.subscriptionChanged, userId: outbox.userId, connection: outbox.id,
                    "subscription set \(version) of session \(session): " + (error.map { "error: \($0)" } ?? "complete"),
                    details: [("session", .int(Int64(session))), ("version", .int(Int64(clamping: version))), ("queries", .array(queries)),
                              ("state", .string(error == nil ? "complete" : "error")), ("error", error.map(StoredJSON.string) ?? .null)])
    }

    // MARK: Uploads

    /// The most summary lines an upload's log entry keeps.
    static let maxUploadLines = 200
    /// The most subscriptions a subscription change's entry lists.
    static let maxListed = 100

    /// An UPLOAD arrived: its changesets, summarised per changeset and object: one line per
    /// run of instructions on one object with one operation (client version, object type,
    /// operation, primary key, count).
    func uploadReceived(_ outbox: ConnectionOutbox, session: UInt64, _ changesets: [UploadIntegration.Decoded]) {
        metrics.uploadReceived(changesets: changesets.count)
        guard let log else { return }
        var lines: [(version: UInt64, table: String, operation: String, key: String, count: Int)] = []
        var undecodable: [StoredJSON] = []
        for d in changesets {
            switch d.changeset {
            case .failure(let e):
                undecodable.append(.object([("client_version", .int(Int64(clamping: d.upload.clientVersion))), ("error", .string(excerpt(e.description)))]))
            case .success(let c):
                for i in c.instructions {
                    let op = Self.operation(i), v = d.upload.clientVersion
                    if let last = lines.last, last.version == v, last.table == i.table, last.key == i.key.keyText, last.operation == op {
                        lines[lines.count - 1].count += 1
                    } else {
                        lines.append((v, i.table, op, i.key.keyText, 1))
                    }
                }
            }
        }
        var summary: [StoredJSON] = lines.prefix(Self.maxUploadLines).map {
            .object([("client_version", .int(Int64(clamping: $0.version))), ("object_type", .string(excerpt($0.table))), ("operation", .string($0.operation)),
                     ("primary_key", .string(excerpt($0.key))), ("count", .int(Int64($0.count)))])
        }
        summary += undecodable.prefix(10)
        let instructions = changesets.reduce(0) { n, d in if case .success(let c) = d.changeset { return n + c.instructions.count } else { return n } }
        log.record(.upload, userId: outbox.userId, connection: outbox.id,
                   "upload of \(changesets.count) changeset(s), \(instructions) instruction(s) in session \(session)",
                   details: [("session", .int(Int64(session))), ("changesets", .array(summary)),
                             ("lines_omitted", .int(Int64(max(0, lines.count - Self.maxUploadLines))))])
    }

    static func operation(_ i: Instruction) -> String {
        switch i {
        case .create: "create"
        case .erase: "erase"
        case .set, .addInteger: "update"
        case .listInsert, .listSet, .listErase, .listClear: "list_update"
        }
    }

    func compensatingWrite(_ outbox: ConnectionOutbox, _ cw: CompensatingWrite) {
        let rule = CompensatingWriteRule(cw)
        metrics.compensatingWrite(rule)
        log?.record(.compensatingWrite, userId: outbox.userId, connection: outbox.id, cw.reason,
                    details: [("object_type", .string(excerpt(cw.objectType))), ("primary_key", .string(excerpt(cw.primaryKey.keyText))),
                              ("reason", .string(excerpt(cw.reason, limit: ServerEventLog.maxMessageBytes))),
                              ("rule", .string(rule.rawValue)), ("role", CompensatingWriteRule.role(of: cw).map(StoredJSON.string) ?? .null)])
    }

    // MARK: Errors

    /// A session ended with an error; a client reset when `trigger` says why.
    func sessionFailed(_ outbox: ConnectionOutbox, session: UInt64, code: Int32, message: String, trigger: ClientResetTrigger?) {
        live.sessionUnbound(outbox.id, session: session)
        if let trigger {
            metrics.clientReset(trigger)
            log?.record(.clientReset, userId: outbox.userId, connection: outbox.id, message,
                        details: [("session", .int(Int64(session))), ("code", .int(Int64(code))), ("trigger", .string(trigger.rawValue))])
        } else {
            log?.record(.error, userId: outbox.userId, connection: outbox.id, "error \(code): \(message)",
                        details: [("session", .int(Int64(session))), ("code", .int(Int64(code)))])
        }
    }

    func connectionFailed(_ outbox: ConnectionOutbox, code: Int32, message: String) {
        log?.record(.error, userId: outbox.userId, connection: outbox.id, "error \(code): \(message)",
                    details: [("session", .int(0)), ("code", .int(Int64(code)))])
    }
}
