import AsyncHTTPClient
import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import NIOCore
import NIOHTTP1

/// Delivers the app's database triggers (`triggers/*.json`, docs/backend.md): each matching
/// change of a trigger's class is POSTed to its webhook, signed, at least once and in
/// version order. One task per trigger; a task delivers only while it holds the trigger's
/// lease in the store (`TriggerStorage`), so with several nodes one delivers each trigger at
/// a time, and another takes over when a holder stops renewing. The cursor is recorded after
/// each page of deliveries: a crash delivers again what it delivered since (the receiver
/// drops repeats by `id`), never skips.
///
/// Delivery wakes on the store's change feed (`HeadWatch`), not on a timer. The timers it
/// has: renewing its lease (`TriggerTiming.renew`), the retry after a failure, and a node
/// that holds no lease (or a paused trigger's) looking again at the renewal interval.
final class TriggerRunner: Sendable {
    struct Trigger: Sendable {
        let events: TriggerEvents
        let secret: [UInt8]
        var name: String { events.trigger.name }
    }

    /// A trigger's signing secret has at least this many bytes.
    static let minimumSecretBytes = 32
    /// Changes read (and delivered) per page between two records of the cursor.
    static let pageSize = 100

    let triggers: [Trigger]
    private let storage: any SyncStorage
    private let store: any TriggerStorage
    private let heads: HeadWatch
    private let authors: ChangeAuthors
    private let node: String
    private let timing: TriggerTiming
    private let metrics: ServerMetrics
    private let logger: Logger
    private let client: HTTPClient
    private let alarms: [String: Alarm]

    /// Resolves every enabled trigger's secret from `secrets` (the environment): a missing or
    /// short one stops the server from starting.
    init(app: AppConfiguration, schema: Schema, secrets: [String: String], storage: any SyncStorage, store: any TriggerStorage, heads: HeadWatch,
         authors: ChangeAuthors, node: String, timing: TriggerTiming, metrics: ServerMetrics, logger: Logger) throws {
        triggers = try app.triggers.filter { !$0.disabled }.map { t in
            guard let value = secrets[t.secretName], !value.isEmpty else {
                throw ServerStartError("trigger '\(t.name)' needs its signing secret in \(t.secretName) (make one with `openssl rand -hex 32`)")
            }
            guard value.utf8.count >= Self.minimumSecretBytes else {
                throw ServerStartError("trigger '\(t.name)''s secret (\(t.secretName)) must have at least \(Self.minimumSecretBytes) bytes, it has \(value.utf8.count)")
            }
            return Trigger(events: try TriggerEvents(t, schema: schema), secret: Array(value.utf8))
        }
        self.storage = storage
        self.store = store
        self.heads = heads
        self.authors = authors
        self.node = node
        self.timing = timing
        self.metrics = metrics
        self.logger = logger
        // A redirect would send the app's data where the trigger does not say.
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.connectionPool.idleTimeout = .seconds(60)
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        alarms = Dictionary(uniqueKeysWithValues: triggers.map { ($0.name, Alarm()) })
    }

    /// Delivers every trigger until cancelled; then closes the HTTP client.
    func run() async {
        await withTaskGroup(of: Void.self) { group in
            for t in triggers { group.addTask { await self.deliver(t) } }
        }
        do { try await client.shutdown() } catch { logger.warning("triggers: closing the webhook client failed: \(error)") }
    }

    /// Wakes trigger `name`'s task now (an admin resumed it) instead of at its next renewal.
    func wake(_ name: String) { alarms[name]?.ring() }

    private static func milliseconds(_ d: Duration) -> Int64 { d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000 }
    private static func nowMilliseconds() -> Int64 { WallClock.system.millisecondsSinceEpoch() }

    private func deliver(_ t: Trigger) async {
        let alarm = alarms[t.name]!
        // Whether this task has seen the trigger's row in the store (then the head, where a
        // new trigger starts, need not be read at each renewal).
        var known = false
        while !Task.isCancelled {
            do {
                try await holdAndDeliver(t, alarm: alarm, known: &known)
            } catch is CancellationError {
                return
            } catch {
                // The store failed (PostgreSQL away): nothing was skipped; try again later.
                logger.warning("trigger '\(t.name)': \(error); trying again in \(timing.renew)")
                await alarm.sleep(for: timing.renew)
            }
        }
    }

    /// Takes or renews the lease, then delivers until the lease must be renewed.
    private func holdAndDeliver(_ t: Trigger, alarm: Alarm, known: inout Bool) async throws {
        // A new trigger starts at the head: it delivers the changes made after it was created.
        let start = known ? 0 : try await storage.syncState().headVersion
        let now = Self.nowMilliseconds()
        let leased = try await store.leaseTrigger(t.name, node: node, nowMilliseconds: now, untilMilliseconds: now + Self.milliseconds(timing.lease),
                                                  cursor: start)
        // Either way the row exists now (this node or another made it).
        known = true
        guard let state = leased else {
            await alarm.sleep(for: timing.renew)   // another node delivers it
            return
        }
        metrics.triggerPaused(t.name, state.paused)
        guard !state.paused else {
            await alarm.sleep(for: timing.renew)
            return
        }
        var cursor = state.cursor, failures = state.failures
        // A cursor moved past changes that delivered nothing (other classes', unmatched ones)
        // is recorded with the next delivery or at the renewal, not once per page: the store
        // is not written at every commit of the app. Lost in a crash, those pages are read again.
        var unrecorded = false
        let renewBy = ContinuousClock.now + timing.renew
        while ContinuousClock.now < renewBy, !Task.isCancelled {
            let page = try await DataAPIChanges.page(storage, after: cursor, classes: [t.events.objectSchema], limit: Self.pageSize, authors: authors)
            if page.events.isEmpty, page.through == cursor {
                // Caught up: asleep until the head moves (or the lease needs renewing).
                await heads.wait(past: cursor, within: renewBy - ContinuousClock.now)
                continue
            }
            var position = cursor, delivered = 0
            var failure: String?
            for (i, e) in page.events.enumerated() {
                if t.events.delivers(e, after: cursor) {
                    do { try await post(t, t.events.body(e, after: cursor)) } catch {
                        failure = "\(error)"
                        break
                    }
                    delivered += 1
                }
                // A version is delivered once all its changes are.
                if i == page.events.count - 1 || page.events[i + 1].version != e.version { position = e.version }
            }
            if failure == nil { position = page.through }
            if failure == nil, delivered == 0, failures == 0 {
                cursor = position
                unrecorded = true
                continue
            }
            failures = failure == nil ? 0 : failures + 1
            let paused = failures >= t.events.trigger.maxFailures
            if delivered > 0 { metrics.triggerDelivered(t.name, count: delivered) }
            let held = try await store.recordTrigger(t.name, node: node, TriggerProgress(cursor: position, failures: failures, paused: paused,
                                                                                         lastError: failure, delivered: Int64(delivered)))
            guard held else {
                logger.notice("trigger '\(t.name)': another node took it over; what this node delivered since version \(cursor) will be delivered again")
                return
            }
            cursor = position
            unrecorded = false
            guard let failure else { continue }
            metrics.triggerFailed(t.name)
            if paused {
                metrics.triggerPaused(t.name, true)
                logger.error("trigger '\(t.name)' paused after \(failures) failures in a row (last: \(failure)); it resumes from version \(cursor) when an admin resumes it (POST /api/admin/v1/triggers/\(t.name)/resume)")
                return
            }
            let wait = TriggerEvents.backoff(failures: failures, base: timing.retry, maximum: timing.maxRetry)
            logger.warning("trigger '\(t.name)': delivery failed (\(failure)), failure \(failures) of \(t.events.trigger.maxFailures); retrying in \(wait)")
            await alarm.sleep(for: wait)
        }
        if unrecorded, try await store.recordTrigger(t.name, node: node, TriggerProgress(cursor: cursor, failures: 0, paused: false, lastError: nil, delivered: 0)) {
            unrecorded = false
        }
    }

    struct WebhookFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// POSTs one change; a 2xx answer is a delivery, anything else a failure.
    private func post(_ t: Trigger, _ body: [UInt8]) async throws {
        var request = HTTPClientRequest(url: t.events.trigger.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Ferry-Trigger", value: t.name)
        request.headers.add(name: "Ferry-Signature", value: TriggerEvents.signature(body: body, secret: t.secret, time: WallClock.system.secondsSinceEpoch()))
        request.body = .bytes(ByteBuffer(bytes: body))
        let response: HTTPClientResponse
        do { response = try await client.execute(request, timeout: .milliseconds(Self.milliseconds(timing.requestTimeout))) } catch {
            throw WebhookFailure(description: "\(t.events.trigger.url): \(error)")
        }
        // The answer's body is read (so the connection can be used again) but not kept; a
        // body that fails to arrive changes nothing: the status said whether it was delivered.
        let status = response.status.code
        _ = try? await response.body.collect(upTo: 64 * 1024)
        guard (200..<300).contains(status) else { throw WebhookFailure(description: "\(t.events.trigger.url) answered HTTP \(status)") }
    }
}

/// A sleep that can be cut short (`ring`): a trigger's task naps here between retries and
/// renewals, and an admin's resume wakes it at once.
final class Alarm: Sendable {
    private struct State {
        var sleeper: CheckedContinuation<Void, Never>?
        /// Rung while no one slept: the next sleep returns at once.
        var rung = false
    }
    private let state = LockedValue(State())

    /// Returns after `duration`, at a ring, or when the task is cancelled.
    func sleep(for duration: Duration) async {
        await withTaskCancellationHandler { await nap(duration) } onCancel: { ring() }
    }

    private func nap(_ duration: Duration) async {
        let timer = LockedValue<Task<Void, Never>?>(nil)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let early = state.withLock { s -> Bool in
                if s.rung || Task.isCancelled {
                    s.rung = false
                    return true
                }
                s.sleeper = c
                return false
            }
            if early { return c.resume() }
            timer.withLock { t in
                t = Task { [weak self] in
                    // Cancelled: rung first, and this timer must not wake a later sleep.
                    guard (try? await Task.sleep(for: duration)) != nil else { return }
                    self?.state.withLock { s -> CheckedContinuation<Void, Never>? in
                        defer { s.sleeper = nil }
                        return s.sleeper
                    }?.resume()
                }
            }
        }
        timer.withLock { $0?.cancel() }
    }

    func ring() {
        state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let c = s.sleeper else {
                s.rung = true
                return nil
            }
            s.sleeper = nil
            return c
        }?.resume()
    }
}
