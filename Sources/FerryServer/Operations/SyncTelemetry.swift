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

    /// The most subscriptions a subscription change's entry lists.
    static let maxListed = 100

    /// Reporting that goes nowhere durable (hubs built by tests without a server).
    static func detached() -> SyncTelemetry { SyncTelemetry(node: "local", metrics: ServerMetrics(), live: LiveConnections(), log: nil) }

    // MARK: Connections

    func connectionOpened(_ outbox: ConnectionOutbox, sdk: String?) {
        live.opened(outbox.id, userId: outbox.userId, sdk: sdk, atMilliseconds: SyncLogRecorder.nowMilliseconds())
        log?.record(.connectionOpened, userId: outbox.userId, connection: outbox.id, "connection opened" + (sdk.map { " by \($0)" } ?? ""),
                    details: [("sdk", sdk.map(JSON.string) ?? .null)])
    }

    func connectionClosed(_ outbox: ConnectionOutbox, reason: String) {
        let c = live.connection(outbox.id)
        live.closed(outbox.id)
        log?.record(.connectionClosed, userId: outbox.userId, connection: outbox.id, "connection closed: \(reason)",
                    details: [("reason", .string(reason)), ("bytes_up", .int(Int64(clamping: c?.bytesUp ?? 0))), ("bytes_down", .int(Int64(clamping: c?.bytesDown ?? 0)))])
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
                    details: [("session", .int(Int64(clamping: session))), ("client_file", .int(Int64(clamping: clientFile))), ("new_client_file", .bool(newFile)),
                              ("server_version", .int(Int64(clamping: serverVersion)))])
    }

    func sessionUnbound(_ outbox: ConnectionOutbox, session: UInt64, reason: String) {
        live.sessionUnbound(outbox.id, session: session)
        log?.record(.sessionUnbound, userId: outbox.userId, connection: outbox.id, "session \(session) unbound: \(reason)",
                    details: [("session", .int(Int64(clamping: session))), ("reason", .string(reason))])
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
            JSON.object([("name", .string(excerpt($0.name))), ("object_type", .string(excerpt($0.objectType))),
                               ("query", .string(excerpt($0.query, limit: 1000)))])
        }
        if subscriptions.count > Self.maxListed { queries.append(.object([("more", .int(Int64(subscriptions.count - Self.maxListed)))])) }
        log?.record(.subscriptionChanged, userId: outbox.userId, connection: outbox.id,
                    "subscription set \(version) of session \(session): " + (error.map { "error: \($0)" } ?? "complete"),
                    details: [("session", .int(Int64(clamping: session))), ("version", .int(Int64(clamping: version))), ("queries", .array(queries)),
                              ("state", .string(error == nil ? "complete" : "error")), ("error", error.map(JSON.string) ?? .null)])
    }

    // MARK: Errors

    /// A session ended with an error; a client reset when `trigger` says why.
    func sessionFailed(_ outbox: ConnectionOutbox, session: UInt64, code: Int32, message: String, trigger: ClientResetTrigger?) {
        live.sessionUnbound(outbox.id, session: session)
        if let trigger {
            metrics.clientReset(trigger)
            log?.record(.clientReset, userId: outbox.userId, connection: outbox.id, message,
                        details: [("session", .int(Int64(clamping: session))), ("code", .int(Int64(code))), ("trigger", .string(trigger.rawValue))])
        } else {
            log?.record(.error, userId: outbox.userId, connection: outbox.id, "error \(code): \(message)",
                        details: [("session", .int(Int64(clamping: session))), ("code", .int(Int64(code)))])
        }
    }

    func connectionFailed(_ outbox: ConnectionOutbox, code: Int32, message: String) {
        log?.record(.error, userId: outbox.userId, connection: outbox.id, "error \(code): \(message)",
                    details: [("session", .int(0)), ("code", .int(Int64(code)))])
    }
}
