import FerryCore
import FerrySyncStorage
import Foundation
import Hummingbird
import NIOCore

/// The Data API's change feed (docs/backend.md): what changed after a server version, in
/// version order, one event per object with its state now (an object changed twice since
/// is one event at its last version, as in CouchDB's and Sync Gateway's `_changes`).
enum DataAPIChanges {
    struct Event: Sendable {
        let version: UInt64
        let objectSchema: ObjectSchema
        let change: ChangedObject
        /// Who made the change (nil: not known, a row from before the store recorded it or
        /// whose client file was forgotten).
        var by: ChangeAuthor? = nil

        /// `{"version", "class", "primaryKey", "operation": "upsert" | "delete", "document",
        /// "by": {"user": id} | {"key": name} | null}`.
        var json: [UInt8] {
            var out: [UInt8] = Array(#"{"version":"#.utf8)
            out += Array(String(version).utf8)
            out += Array(#","class":"#.utf8)
            JSONText.appendQuoted(objectSchema.name, to: &out)
            out += Array(#","primaryKey":"#.utf8)
            DataAPIValues.append(change.key, to: &out)
            out += Array(#","operation":"#.utf8)
            if let object = change.object {
                out += Array(#""upsert","document":"#.utf8)
                DataAPIValues.appendDocument(object.values, schema: objectSchema, to: &out)
            } else {
                out += Array(#""delete","document":null"#.utf8)
            }
            out += Array(#","by":"#.utf8)
            appendBy(to: &out)
            out.append(UInt8(ascii: "}"))
            return out
        }

        /// Who made the change, as JSON: `{"user": id}`, `{"key": name}`, `{"sql": true}` or `null`.
        func appendBy(to out: inout [UInt8]) {
            switch by {
            case .user(let id):
                out += Array(#"{"user":"#.utf8)
                JSONText.appendQuoted(id, to: &out)
                out.append(UInt8(ascii: "}"))
            case .key(let name):
                out += Array(#"{"key":"#.utf8)
                JSONText.appendQuoted(name, to: &out)
                out.append(UInt8(ascii: "}"))
            case .sql:
                out += Array(#"{"sql":true}"#.utf8)
            case nil:
                out += Array("null".utf8)
            }
        }
    }

    private struct Enough: Error {}

    /// Changes after `after` of `classes`, in (version, class) order, about `limit` of them:
    /// never part of a version (a version's objects all come in one page, so `after` = the
    /// last event's version loses nothing), so a page may hold more than `limit` when one
    /// version changed more objects. `through`: every change up to this version was read (the
    /// snapshot's version when nothing was left out), the next page's `after` even when the
    /// caller sees none of the events (other classes, a user's read rules).
    static func page(_ storage: any SyncStorage, after: UInt64, classes: [ObjectSchema], limit: Int, authors: ChangeAuthors) async throws
        -> (events: [Event], through: UInt64) {
        var (events, through) = try await storage.withSnapshot { snap in
            var events: [Event] = []
            // The version up to which every class was read completely.
            var complete = snap.version
            for os in classes {
                var count = 0
                var last: UInt64 = 0
                do {
                    try await snap.changes(since: after, schema: os) { c in
                        if count >= limit, c.version != last { throw Enough() }
                        events.append(Event(version: c.version, objectSchema: os, change: c))
                        count += 1
                        last = c.version
                    }
                } catch is Enough {
                    complete = min(complete, last)
                }
            }
            // Read class by class, each in (version, key) order: sorted by version, ties keep
            // that order (class, then key).
            let page = events.enumerated().filter { $0.element.version <= complete }
                .sorted { ($0.element.version, $0.offset) < ($1.element.version, $1.offset) }.map(\.element)
            return (page, max(after, complete))
        }
        for i in events.indices { events[i].by = try await authors.author(of: events[i].change.author) }
        return (events, through)
    }
}

/// Who made a change, as the change feed says it.
enum ChangeAuthor: Sendable, Equatable {
    /// A device's user, or a user's access token on the Data API.
    case user(String)
    /// A Data API server key.
    case key(String)
    /// A backend's SQL write to the SQL tables (PostgreSQL).
    case sql
}

/// Client file → who made a change, remembered (a client file's user never changes and its
/// ident is never reused), at most `capacity` of them.
final class ChangeAuthors: Sendable {
    private let storage: any SyncStorage
    private let known = LockedValue<[UInt64: ChangeAuthor]>([:])
    static let capacity = 4096

    init(_ storage: any SyncStorage) { self.storage = storage }

    func author(of file: UInt64?) async throws -> ChangeAuthor? {
        guard let file else { return nil }
        if let a = known.withLock({ $0[file] }) { return a }
        // A forgotten file (a device offline too long) no longer says whose it was.
        guard let record = try await storage.clientFile(file) else { return nil }
        let author = BackendWrites.author(ofFileUser: record.userId)
        known.withLock { k in
            if k.count >= Self.capacity { k.removeAll(keepingCapacity: true) }
            k[file] = author
        }
        return author
    }
}

/// The newest head version this node has heard of, and waits for it to pass a version (the
/// change feed's SSE streams sleep here between changes).
final class HeadWatch: Sendable {
    private struct State {
        var head: UInt64 = 0
        var ended = false
        var waiters: [UInt64: (after: UInt64, CheckedContinuation<Void, Never>)] = [:]
        var nextId: UInt64 = 0
    }
    private let state = LockedValue(State())
    private let listener: LockedValue<Task<Void, Never>?> = LockedValue(nil)

    init(_ feed: any ChangeFeed) {
        let signals = feed.signals()
        listener.withLock { task in
            task = Task { [weak self] in
                for await s in signals { self?.heard(s.headVersion) }
                self?.end()
            }
        }
    }

    deinit { listener.withLock { $0?.cancel() } }

    var head: UInt64 { state.withLock { $0.head } }

    private func heard(_ head: UInt64) {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.head = max(s.head, head)
            let due = s.waiters.filter { $0.value.after < s.head }
            for id in due.keys { s.waiters[id] = nil }
            return due.map(\.value.1)
        }
        for c in ready { c.resume() }
    }

    private func end() {
        let all = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.ended = true
            defer { s.waiters = [:] }
            return s.waiters.map(\.value.1)
        }
        for c in all { c.resume() }
    }

    /// Returns once the head passed `after`, or after `limit`, or when the feed ended, or
    /// when the task is cancelled.
    func wait(past after: UInt64, within limit: Duration) async {
        let id = state.withLock { s -> UInt64 in
            s.nextId += 1
            return s.nextId
        }
        let timer = LockedValue<Task<Void, Never>?>(nil)
        await withTaskCancellationHandler {
            await waitRegistered(id, past: after, within: limit, timer: timer)
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.1.resume()
        }
        timer.withLock { $0?.cancel() }
    }

    private func waitRegistered(_ id: UInt64, past after: UInt64, within limit: Duration, timer: LockedValue<Task<Void, Never>?>) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.ended || s.head > after || Task.isCancelled { return true }
                s.waiters[id] = (after, c)
                return false
            }
            if now { return c.resume() }
            // Started once the waiter is registered, so a timeout is never lost.
            timer.withLock { t in
                t = Task { [weak self] in
                    // Cancelled: the head moved first and nothing is left to time out.
                    guard (try? await Task.sleep(for: limit)) != nil else { return }
                    let c = self?.state.withLock { $0.waiters.removeValue(forKey: id) }
                    c?.1.resume()
                }
            }
        }
    }
}
