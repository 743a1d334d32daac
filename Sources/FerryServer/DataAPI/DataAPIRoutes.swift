import FerryAppConfig
import FerryCore
import FerrySyncStorage
import Foundation
import Hummingbird

/// The Data API over HTTP, in the Atlas Data API's shape (`POST .../action/<name>` with a
/// JSON body, Extended JSON values; SPEC F-BACKEND, docs/backend.md), for an application's
/// backend holding a server key. This first part reads: `find` (a query in Ferry's query
/// language with `$n` arguments, pages in primary-key order) and `findOne` (by primary key).
struct DataAPIRoutes {
    let appId: String
    let keys: DataAPIKeys
    let storage: any SyncStorage
    let schema: Schema

    /// Objects one `find` returns at most, and its default.
    static let maxLimit = 1000
    static let defaultLimit = 100
    /// Objects one `find` reads at most: a filter that matches little ends a page early,
    /// with a cursor, rather than reading the whole class in one request.
    static let maxExamined = 10_000

    struct FindRequest: Decodable {
        var `class`: String
        var filter: String?
        var arguments: [StoredJSON]?
        var limit: Int?
        var after: String?
    }

    struct FindOneRequest: Decodable {
        var `class`: String
        var primaryKey: StoredJSON
    }

    func add(to router: Router<ServerRequestContext>) {
        let group = router.group("api/data/v1/app/:app/action")
        group.post("find") { request, context -> Response in
            try check(context)
            _ = try keys.authorize(request)
            let body = try await decode(FindRequest.self, request, context)
            return try await find(body)
        }
        group.post("findOne") { request, context -> Response in
            try check(context)
            _ = try keys.authorize(request)
            let body = try await decode(FindOneRequest.self, request, context)
            return try await findOne(body)
        }
    }

    private func check(_ context: ServerRequestContext) throws {
        guard context.parameters.get("app") == appId else {
            throw APIError(status: .notFound, code: "AppNotFound", message: "no app '\(context.parameters.get("app") ?? "")' on this server")
        }
    }

    private func decode<T: Decodable>(_ type: T.Type, _ request: Request, _ context: ServerRequestContext) async throws -> T {
        do { return try await request.decode(as: T.self, context: context) } catch let e as HTTPResponseError {
            throw e
        } catch {
            throw APIError(status: .badRequest, code: "InvalidParameter", message: "the request body is not the JSON this action takes: \(error)")
        }
    }

    private func objectSchema(_ name: String) throws -> ObjectSchema {
        guard let os = schema.objectSchema(named: name) else {
            throw APIError(status: .notFound, code: "ClassNotFound", message: "no class '\(excerpt(name, limit: 100))' in the app's schema")
        }
        return os
    }

    private func bad(_ message: String) -> APIError { APIError(status: .badRequest, code: "InvalidParameter", message: message) }

    func find(_ r: FindRequest) async throws -> Response {
        let os = try objectSchema(r.class)
        let limit = r.limit ?? Self.defaultLimit
        guard (1...Self.maxLimit).contains(limit) else { throw bad("limit must be between 1 and \(Self.maxLimit), got \(limit)") }
        let arguments: [FerryValue]
        do { arguments = try (r.arguments ?? []).map(DataAPIValues.value) } catch let e as DataAPIValues.Invalid { throw bad("arguments: \(e.message)") }
        let text = r.filter ?? "TRUEPREDICATE"
        let query: CompiledQuery
        do { query = try CompiledQuery(text, on: os, arguments: arguments) } catch let e as FerryError {
            throw bad("invalid filter '\(excerpt(text))' on '\(os.name)': \(e.message)")
        }
        guard query.sort.isEmpty, query.limit == nil else {
            throw bad("SORT and LIMIT in a filter are not supported by find yet: results come in primary-key order; page with \"limit\" and \"after\"")
        }
        var start: [UInt8]?
        if let cursor = r.after {
            guard let raw = Self.cursorBytes(cursor) else { throw bad("after is not a cursor this API returned") }
            start = raw
        }
        let after = start
        let page = try await storage.withSnapshot { snap -> (documents: [UInt8], next: [UInt8]?) in
            var documents: [UInt8] = []
            var found = 0, examined = 0
            var position = after
            while found < limit, examined < Self.maxExamined {
                let want = min(500, Self.maxExamined - examined)
                let rows = try await snap.objects(of: os, after: position, limit: want)
                var rest = rows.count
                for row in rows {
                    examined += 1
                    rest -= 1
                    position = row.rawKey
                    guard query.matches(row.object.values) else { continue }
                    if found > 0 { documents.append(UInt8(ascii: ",")) }
                    DataAPIValues.appendDocument(row.object.values, schema: os, to: &documents)
                    found += 1
                    if found == limit { break }
                }
                // A short page read to its end: the class has no more objects.
                if rest == 0, rows.count < want { return (documents, nil) }
            }
            return (documents, position)
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

    func findOne(_ r: FindOneRequest) async throws -> Response {
        let os = try objectSchema(r.class)
        let key: FerryValue
        do { key = try DataAPIValues.primaryKey(r.primaryKey, of: os.primaryKey.type) } catch let e as DataAPIValues.Invalid {
            throw bad("primaryKey: \(e.message)")
        }
        let stored = try await storage.object(ObjectKey(table: os.name, key: key), schema: os)
        var out: [UInt8] = Array(#"{"document":"#.utf8)
        if let object = stored?.object { DataAPIValues.appendDocument(object.values, schema: os, to: &out) } else { out += Array("null".utf8) }
        out.append(UInt8(ascii: "}"))
        return Self.json(out)
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
        guard let data = Data(base64Encoded: b64), (try? ValueCodec.decode(Array(data))) != nil else { return nil }
        return Array(data)
    }

    static func json(_ bytes: [UInt8]) -> Response {
        Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
