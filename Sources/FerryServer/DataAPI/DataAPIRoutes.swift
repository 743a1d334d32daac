import FerryAppConfig
import FerryAuth
import FerryCore
import FerrySyncStorage
import Foundation
import HTTPTypes
import Hummingbird

/// The Data API over HTTP, in the Atlas Data API's shape (`POST .../action/<name>` with a
/// JSON body, Extended JSON values; SPEC F-BACKEND, docs/backend.md), for an application's
/// backend holding a server key or a user's token. Here: the routes, who calls and the sync
/// log of each call, the reads (`find` with the query language, `count`, `findOne`) and the
/// change feed. The writes are in DataAPIRoutes+Writes.swift.
struct DataAPIRoutes {
    let appId: String
    let keys: DataAPIKeys
    let storage: any SyncStorage
    let schema: Schema
    let writes: BackendWrites
    /// The node's head as its change feed tells it (nil while the Data API is off: nothing
    /// listens then).
    let heads: HeadWatch?
    let auth: AuthService
    let app: AppConfiguration
    /// Who made each change the feed shows.
    let authors: ChangeAuthors
    /// Every call is recorded in the sync log of the user or key that made it (nil in tests
    /// that do not look).
    let log: SyncLogRecorder?

    /// Objects one `find` returns at most, and its default.
    static let maxLimit = 1000
    static let defaultLimit = 100
    /// Objects one `find` reads at most: a filter that matches little ends a page early,
    /// with a cursor, rather than reading the whole class in one request.
    static let maxExamined = 10_000

    struct FindRequest: Decodable {
        var `class`: String
        var filter: String?
        var arguments: [JSON]?
        var limit: Int?
        var after: String?
    }

    struct FindOneRequest: Decodable {
        var `class`: String
        var primaryKey: JSON
    }

    func add(to router: Router<ServerRequestContext>) {
        let group = router.group("api/data/v1/app/:app/action")
        route(group, .post, "find") { request, context, call -> Response in
            let caller = call.caller
            let body = try await decode(FindRequest.self, request, context)
            return try await find(body, as: caller)
        }
        route(group, .post, "count") { request, context, call -> Response in
            let caller = call.caller
            let body = try await decode(FindRequest.self, request, context)
            return try await count(body, as: caller)
        }
        route(group, .post, "findOne") { request, context, call -> Response in
            let caller = call.caller
            let body = try await decode(FindOneRequest.self, request, context)
            return try await findOne(body, as: caller)
        }
        addWrites(to: group)
        route(router, .get, "api/data/v1/app/:app/changes") { request, context, call -> Response in
            let caller = call.caller
            return try await changes(request, as: caller)
        }
    }

    static let lastEventID = HTTPField.Name("Last-Event-ID")!

    /// Adds one action: the app is checked, the caller authenticated (a call without a valid
    /// key or token is refused before it is anyone's to log), then the call runs and is
    /// recorded in the sync log with its answer's status, whatever it was.
    func route(_ methods: some RouterMethods<ServerRequestContext>, _ method: HTTPRequest.Method, _ path: String,
                       _ handle: @escaping @Sendable (Request, ServerRequestContext, DataAPICall) async throws -> Response) {
        let action = path.split(separator: "/").last.map(String.init) ?? path
        methods.on(RouterPath(path), method: method) { request, context -> Response in
            try check(context)
            let call = DataAPICall(caller: try await keys.caller(request, auth: auth))
            do {
                let response = try await handle(request, context, call)
                record(action, call, status: response.status, error: nil)
                return response
            } catch let e as APIError {
                record(action, call, status: e.status, error: e.message)
                throw e
            } catch {
                record(action, call, status: .internalServerError, error: String(describing: error))
                throw error
            }
        }
    }

    private func record(_ action: String, _ call: DataAPICall, status: HTTPResponse.Status, error: String?) {
        guard let log else { return }
        let user: String
        switch call.caller {
        case .key(let key): user = BackendWrites.userId(ofKey: key.name)
        case .user(let u): user = u.id
        }
        var details: [(String, JSON)] = [("action", .string(action)), ("status", .int(Int64(status.code)))]
        var message = "Data API \(action): \(status.code)"
        if let written = call.written {
            details.append(("version", .int(Int64(bitPattern: written.version))))
            details.append(("instructions", .int(Int64(written.instructions))))
            message += ", version \(written.version)"
        }
        if let error { message += ": \(error)" }
        log.record(.dataAPI, userId: user, connection: 0, message, details: details)
    }

    /// What a caller may read: everything for a server key that runs as the system; for a
    /// user (or a key that runs as a role), what the app's rules let it read (a server-side
    /// view of every class, as a device with every class subscribed would see).
    func readFilter(_ caller: DataAPICaller) -> @Sendable ([FerryValue], ObjectSchema) -> Bool {
        guard let (view, rules) = writes.access(caller) else { return { _, _ in true } }
        return { values, os in view.mayRead(values, of: os, app: rules) }
    }

    /// The change-feed events a caller sees: for a user, an object it may read now, and the
    /// delete of one it could read before the delete (as a device's catch-up learns of it).
    func eventFilter(_ caller: DataAPICaller) -> @Sendable (DataAPIChanges.Event) -> Bool {
        let readable = readFilter(caller)
        return { e in
            if let o = e.change.object { return readable(o.values, e.objectSchema) }
            return e.change.erasedState.map { readable($0.values, e.objectSchema) } ?? false
        }
    }

    /// Events a change-feed page holds about (a version's objects are never split).
    static let changesPage = 1000
    /// An SSE stream's keep-alive comment, so idle proxies and the idle timeout keep it open.
    static let keepAlive: Duration = .seconds(15)

    /// `GET .../changes?after=VERSION&classes=A,B`: NDJSON of the changes after VERSION (at
    /// most about `limit`, then the answer ends), or, with `Accept: text/event-stream`, an
    /// endless SSE stream whose event ids are versions (`Last-Event-ID` resumes).
    func changes(_ request: Request, as caller: DataAPICaller) async throws -> Response {
        let query = request.uri.queryParameters
        var after: UInt64 = 0
        if let text = request.headers[Self.lastEventID] ?? query.get("after") {
            guard let v = UInt64(text) else { throw bad("after (or Last-Event-ID) must be a server version, got \(excerpt(text, limit: 40))") }
            after = v
        }
        var classes = schema.classes
        if let names = query.get("classes"), !names.isEmpty {
            classes = try names.split(separator: ",").map { try objectSchema(String($0)) }
        }
        let limit = try query.get("limit").map { text -> Int in
            guard let n = Int(text), (1...Self.changesPage).contains(n) else { throw bad("limit must be between 1 and \(Self.changesPage)") }
            return n
        } ?? Self.changesPage
        guard let heads else { throw APIError(status: .notFound, code: "DataAPIDisabled", message: "the Data API is disabled") }
        // Every version up to the head can be resumed from (tombstones are kept: no history
        // is trimmed); a version beyond it is a cursor of another app or of a store restored
        // from an older backup, and following it would silently skip changes.
        let head = try await storage.syncState().headVersion
        guard after <= head else {
            throw APIError(status: .badRequest, code: "InvalidVersion",
                           message: "after (or Last-Event-ID) \(after) is beyond this app's head version \(head): a cursor of another app or of a store restored from a backup; read again from 0")
        }
        let (storage, authors) = (storage, authors)
        let (chosen, start) = (classes, after)
        let visible = eventFilter(caller)
        if request.headers[.accept]?.contains("text/event-stream") == true {
            let body = ResponseBody { writer in
                var position = start
                while true {
                    let page = try await DataAPIChanges.page(storage, after: position, classes: chosen, limit: Self.changesPage, authors: authors)
                    let events = page.events.filter(visible)
                    if !events.isEmpty {
                        var out: [UInt8] = []
                        for e in events {
                            out += Array("id: \(e.version)\ndata: ".utf8)
                            out += e.json
                            out += Array("\n\n".utf8)
                        }
                        try await writer.write(ByteBuffer(bytes: out))
                    }
                    guard page.through <= position else {
                        position = page.through
                        continue
                    }
                    // Caught up: asleep until the head passes, with a keep-alive now and then.
                    await heads.wait(past: position, within: Self.keepAlive)
                    if heads.head <= position { try await writer.write(ByteBuffer(string: ": keep-alive\n\n")) }
                }
            }
            return Response(status: .ok, headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"], body: body)
        }
        let page = try await DataAPIChanges.page(storage, after: after, classes: chosen, limit: limit, authors: authors)
        var out: [UInt8] = []
        for e in page.events where visible(e) {
            out += e.json
            out.append(UInt8(ascii: "\n"))
        }
        // Where the next page starts, also when the caller saw no event of this one.
        return Response(status: .ok, headers: [.contentType: "application/x-ndjson", Self.nextAfter: String(page.through)],
                        body: .init(byteBuffer: ByteBuffer(bytes: out)))
    }

    /// The NDJSON answer's header: the `after` of the next page.
    static let nextAfter = HTTPField.Name("Ferry-Next-After")!

    private func check(_ context: ServerRequestContext) throws {
        guard context.parameters.get("app") == appId else {
            throw APIError(status: .notFound, code: "AppNotFound", message: "no app '\(context.parameters.get("app") ?? "")' on this server")
        }
    }

    func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: ServerRequestContext) async throws -> T {
        do { return try await request.decode(as: T.self, context: context) } catch let e as HTTPResponseError {
            throw e
        } catch {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "the request body is not the JSON this action takes: \(error)")
        }
    }

    func objectSchema(_ name: String) throws -> ObjectSchema {
        guard let os = schema.objectSchema(named: name) else {
            throw APIError(status: .notFound, code: "ClassNotFound", message: "no class '\(excerpt(name, limit: 100))' in the app's schema")
        }
        return os
    }

    func bad(_ message: String) -> APIError { APIError(status: .badRequest, code: "InvalidParameter", message: message) }

    /// A filter compiled for `find` or `count`, with the cursor to start after.
    private func compileFilter(_ r: FindRequest, _ os: ObjectSchema, sorted: Bool = false) throws -> (query: CompiledQuery, after: [UInt8]?) {
        let arguments: [FerryValue]
        do { arguments = try (r.arguments ?? []).map(DataAPIValues.value) } catch let e as DataAPIValues.Invalid { throw bad("arguments: \(e.message)") }
        let text = r.filter ?? "TRUEPREDICATE"
        let query: CompiledQuery
        do { query = try CompiledQuery(text, on: os, arguments: arguments) } catch let e as FerryError {
            throw bad("invalid filter '\(excerpt(text))' on '\(os.name)': \(e.message)")
        }
        guard sorted || (query.sort.isEmpty && query.limit == nil) else { throw bad("count takes no SORT or LIMIT") }
        guard let cursor = r.after else { return (query, nil) }
        guard query.sort.isEmpty, query.limit == nil else {
            throw bad("after pages in primary-key order; a find with SORT or LIMIT answers in one page (LIMIT and \"limit\" bound it)")
        }
        guard let raw = Self.cursorBytes(cursor) else { throw bad("after is not a cursor this API returned") }
        return (query, raw)
    }

    /// Reads a class in primary-key order after `after`, handing each object the query and
    /// the caller's rules let through to `visit` until it says stop or `maxExamined` objects
    /// were read. Answers where to resume, nil when the class was read to its end.
    private static func scan(_ snap: any SyncSnapshot, _ os: ObjectSchema, after: [UInt8]?, maxExamined: Int,
                             _ keep: ([FerryValue]) -> Bool, visit: ([FerryValue]) -> Bool) async throws -> [UInt8]? {
        var examined = 0
        var position = after
        while examined < maxExamined {
            let want = min(500, maxExamined - examined)
            let rows = try await snap.objects(of: os, after: position, limit: want)
            var rest = rows.count
            for row in rows {
                examined += 1
                rest -= 1
                position = row.rawKey
                guard keep(row.object.values) else { continue }
                if !visit(row.object.values) { return position }
            }
            // A short page read to its end: the class has no more objects.
            if rest == 0, rows.count < want { return nil }
        }
        return position
    }

    func find(_ r: FindRequest, as caller: DataAPICaller) async throws -> Response {
        let os = try objectSchema(r.class)
        let readable = readFilter(caller)
        let limit = r.limit ?? Self.defaultLimit
        guard (1...Self.maxLimit).contains(limit) else { throw bad("limit must be between 1 and \(Self.maxLimit), got \(limit)") }
        let (query, after) = try compileFilter(r, os, sorted: true)
        if !query.sort.isEmpty || query.limit != nil { return try await findSorted(query, os, limit: limit, readable: readable) }
        let page = try await storage.withSnapshot { snap -> (documents: [UInt8], next: [UInt8]?) in
            var documents: [UInt8] = []
            var found = 0
            let next = try await Self.scan(snap, os, after: after, maxExamined: Self.maxExamined,
                                           { query.matches($0) && readable($0, os) }) { values in
                if found > 0 { documents.append(UInt8(ascii: ",")) }
                DataAPIValues.appendDocument(values, schema: os, to: &documents)
                found += 1
                return found < limit
            }
            return (documents, next)
        }
        var out: [UInt8] = Array(#"{"documents":["#.utf8)
        out += page.documents
        out.append(UInt8(ascii: "]"))
        if let next = page.next {
            out += Array(#","next":"#.utf8)
            JSONText.appendQuoted(Self.cursor(next), to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return Self.json(out)
    }

    /// Objects a find with SORT reads at most: it must read every object of the class.
    static let maxSorted = 100_000

    /// A find with SORT or LIMIT in its filter: one page of at most `limit` (and the filter's
    /// LIMIT) objects in the filter's order (ties in primary-key order). It reads the whole
    /// class, keeping only the best `limit` as it goes; a class larger than `maxSorted` is
    /// refused (page in primary-key order instead, or, on PostgreSQL, sort in SQL).
    private func findSorted(_ query: CompiledQuery, _ os: ObjectSchema, limit: Int, readable: @escaping @Sendable ([FerryValue], ObjectSchema) -> Bool) async throws -> Response {
        let keep = min(limit, query.limit ?? limit)
        let best = try await storage.withSnapshot { snap -> [[FerryValue]]? in
            var best: [[FerryValue]] = []
            let next = try await Self.scan(snap, os, after: nil, maxExamined: Self.maxSorted, { query.matches($0) && readable($0, os) }) { values in
                best.append(values)
                // Trimmed now and then: the memory stays about twice `keep` objects.
                if best.count >= 2 * keep + 64 { best = query.orderAndLimit(best) { $0 }.prefix(keep).map { $0 } }
                return true
            }
            return next == nil ? query.orderAndLimit(best) { $0 }.prefix(keep).map { $0 } : nil
        }
        guard let best else {
            throw bad("SORT reads the whole class, and '\(os.name)' has more than \(Self.maxSorted) objects: page in primary-key order with \"limit\" and \"after\" (or, on PostgreSQL, sort in SQL on the class's table)")
        }
        var out: [UInt8] = Array(#"{"documents":["#.utf8)
        for (n, values) in best.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            DataAPIValues.appendDocument(values, schema: os, to: &out)
        }
        out += Array("]}".utf8)
        return Self.json(out)
    }

    /// Objects one `count` call reads at most (it encodes nothing, so more than `find`).
    static let maxCounted = 100_000

    /// `count`: how many objects of a class match the filter (and the caller's rules). A
    /// class larger than `maxCounted` is counted in several calls: the answer then has `next`,
    /// and the caller adds the counts of the calls that follow with `after`.
    func count(_ r: FindRequest, as caller: DataAPICaller) async throws -> Response {
        let os = try objectSchema(r.class)
        let readable = readFilter(caller)
        guard r.limit == nil else { throw bad("count takes no limit") }
        let (query, after) = try compileFilter(r, os)
        let (count, next) = try await storage.withSnapshot { snap -> (Int, [UInt8]?) in
            var count = 0
            let next = try await Self.scan(snap, os, after: after, maxExamined: Self.maxCounted,
                                           { query.matches($0) && readable($0, os) }) { _ in count += 1; return true }
            return (count, next)
        }
        var fields: [(String, String)] = [("count", "\(count)")]
        if let next { var q: [UInt8] = []; JSONText.appendQuoted(Self.cursor(next), to: &q); fields.append(("next", String(decoding: q, as: UTF8.self))) }
        return Self.json(Self.object(fields))
    }

    func findOne(_ r: FindOneRequest, as caller: DataAPICaller) async throws -> Response {
        let os = try objectSchema(r.class)
        let key: FerryValue
        do { key = try DataAPIValues.primaryKey(r.primaryKey, of: os.primaryKey.type) } catch let e as DataAPIValues.Invalid {
            throw bad("primaryKey: \(e.message)")
        }
        let stored = try await storage.object(ObjectKey(table: os.name, key: key), schema: os)
        var out: [UInt8] = Array(#"{"document":"#.utf8)
        // An object the user may not read is as absent as one that does not exist.
        if let object = stored?.object, readFilter(caller)(object.values, os) { DataAPIValues.appendDocument(object.values, schema: os, to: &out) } else { out += Array("null".utf8) }
        out.append(UInt8(ascii: "}"))
        return Self.json(out)
    }

    /// A JSON object of already-written member values.
    static func object(_ members: [(String, String)]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (n, (k, v)) in members.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(k, to: &out)
            out.append(UInt8(ascii: ":"))
            out += Array(v.utf8)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// A page's cursor: the last examined object's encoded primary key, base64url.
    static func cursor(_ raw: [UInt8]) -> String {
        Data(raw).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func cursorBytes(_ cursor: String) -> [UInt8]? {
        guard !cursor.isEmpty, cursor.utf8.count <= 8192 else { return nil }
        var b64 = cursor.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        b64 += String(repeating: "=", count: (4 - b64.utf8.count % 4) % 4)
        // Only checked to be an encoded key: a forged cursor is refused as one, whatever the reason.
        guard let data = Data(base64Encoded: b64), (try? ValueCodec.decode(Array(data))) != nil else { return nil }
        return Array(data)
    }

    static func json(_ bytes: [UInt8]) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// One Data API call, as the sync log records it: who made it and what it wrote.
final class DataAPICall: Sendable {
    let caller: DataAPICaller
    private let write = LockedValue<(version: UInt64, instructions: Int)?>(nil)
    init(caller: DataAPICaller) { self.caller = caller }

    func note(version: UInt64, instructions: Int) { write.withLock { $0 = (version, instructions) } }
    var written: (version: UInt64, instructions: Int)? { write.withLock { $0 } }
}
