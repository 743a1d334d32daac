import FerryClient
import FerryCore
import Foundation
import Testing

/// The client's side of the device's online query (issue 24): the Extended JSON reader (exact
/// integers, hostile input refused without a trap) and `App.remoteFind` / `remoteCount` against
/// a scripted server, for what a real ferry-server does not do on demand: an expired access
/// token (a 401, a refresh, the retry), a refresh refused, a cursor answered again, a malformed
/// answer. The live server's answers are tested by Tests/c/test_remote.c and the bindings.
@Suite("Client: remote find and count")
struct RemoteQueryTests {
    // MARK: the Extended JSON reader

    @Test func integersAreExactAndEveryFormReads() throws {
        let text = #"{"next":"c","documents":[{"_id":{"$oid":"0123456789abcdef01234567"},"max":9223372036854775807,"min":-9223372036854775808,""#
            + #"big":9007199254740993,"d":1.0,"e":2.5e-8,"nan":{"$numberDouble":"NaN"},"inf":{"$numberDouble":"-Infinity"},"#
            + #""long":{"$numberLong":"-42"},"u":{"$uuid":"12345678-9abc-def0-1234-56789abcdef0"},"t":{"$date":"1968-12-31T23:59:59.123456789Z"},"#
            + #""y":{"$date":"+010000-01-01T00:00:00.500Z"},"ms":{"$date":{"$numberLong":"-1"}},"bin":{"$binary":{"base64":"AP8B","subType":"00"}},"#
            + #""s":"q\"\n\u00e9\ud83d\udea2","n":null,"b":true,"l":[1,-1,null]}]}"#
        let page = try ExtendedJSON.findPage(Array(text.utf8))
        #expect(page.next == "c")
        #expect(page.documents.count == 1)
        let d = try #require(page.documents.first)
        #expect(d.value("_id") == .objectId(try ObjectId(hex: "0123456789abcdef01234567")))
        #expect(d.value("max") == .int(.max))
        #expect(d.value("min") == .int(.min))
        #expect(d.value("big") == .int(9_007_199_254_740_993))
        #expect(d.value("d") == .double(1.0))
        #expect(d.value("e") == .double(2.5e-8))
        if case .double(let nan)? = d.value("nan") { #expect(nan.isNaN) } else { Issue.record("NaN: \(String(describing: d.value("nan")))") }
        #expect(d.value("inf") == .double(-.infinity))
        #expect(d.value("long") == .int(-42))
        #expect(d.value("u") == .uuid(try FerryUUID(string: "12345678-9abc-def0-1234-56789abcdef0")))
        #expect(d.value("t") == .timestamp(try Timestamp(seconds: -86_400 * 365 - 1, nanoseconds: 123_456_789)))
        #expect(d.value("y") == .timestamp(try Timestamp(seconds: 253_402_300_800, nanoseconds: 500_000_000)))
        #expect(d.value("ms") == .timestamp(try Timestamp(seconds: -1, nanoseconds: 999_000_000)))
        #expect(d.value("bin") == .binary([0, 255, 1]))
        #expect(d.value("s") == .string("q\"\n\u{e9}\u{1F6A2}"))
        #expect(d.value("n") == .null)
        #expect(d.value("b") == .bool(true))
        #expect(d.value("l") == .list([.int(1), .int(-1), .null]))
        // the document's text is the server's, byte for byte
        #expect(d.text.hasPrefix(#"{"_id":{"$oid":"0123456789abcdef01234567"},"max":9223372036854775807"#))
        #expect(d.text.hasSuffix(#""l":[1,-1,null]}"#))
        #expect(try ExtendedJSON.countPage(Array(#"{"count":3,"next":"x"}"#.utf8)).count == 3)
    }

    @Test func hostileAnswersAreRefusedWithoutATrap() {
        let nested = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let bad = [
            #"{"documents":[{"a":9223372036854775808}]}"#, #"{"documents":[{"a":-9223372036854775809}]}"#,
            #"{"documents":[{"a":01}]}"#, #"{"documents":[{"a":1.}]}"#, #"{"documents":[{"a":-}]}"#, #"{"documents":[{"a":1e999}]}"#,
            #"{"documents":[{"a":.5}]}"#, #"{"documents":[{"a":[[1]]}]}"#, #"{"documents":[{"a":{"$oops":"1"}}]}"#,
            #"{"documents":[{"a":{"x":1,"y":2}}]}"#, #"{"documents":[{"a":{"$binary":{"base64":"A===","subType":"00"}}}]}"#,
            #"{"documents":[{"a":{"$date":"2026-02-30T00:00:00.000Z"}}]}"#, #"{"documents":[{"a":{"$date":"+999999999999-01-01T00:00:00Z"}}]}"#,
            #"{"documents":[{"a":{"$oid":"xyz"}}]}"#, #"{"documents":[1]}"#, #"{"documents":{}}"#, #"{"next":"c"}"#, #"{"documents":[]} x"#,
            #"{"documents":[{"a":"\ud800"}]}"#, #"{"documents":[{"a":tru}]}"#, "{\"documents\":[" + nested + "]}",
            #"{"documents":[{"a":"#, "", #"{"documents":[{"a":1"# + String(repeating: "0", count: 200) + "}]}",
        ]
        for text in bad {
            #expect(throws: FerryError.self, "\(text.prefix(80))") { _ = try ExtendedJSON.findPage(Array(text.utf8)) }
        }
        for text in [#"{"count":-1}"#, #"{"count":1.5}"#, #"{"count":"1"}"#, #"{"count":1,"next":2}"#, #"{}"#] {
            #expect(throws: FerryError.self, "\(text)") { _ = try ExtendedJSON.countPage(Array(text.utf8)) }
        }
    }

    @Test func datesAndArgumentsRoundTrip() throws {
        for (s, ns) in [(Int64.min, Int32(0)), (Int64.max, 999_999_999), (0, 0), (-1, 1), (253_402_300_799, 999_000_000), (-62_167_219_201, 5)] {
            let t = try Timestamp(seconds: s, nanoseconds: ns)
            #expect(try ExtendedJSON.date(ExtendedJSON.dateText(t)) == t, "\(s).\(ns): \(ExtendedJSON.dateText(t))")
        }
        let values: [FerryValue] = [.int(.min), .int(.max), .double(0.1), .double(-.infinity), .string("a\"\\\n"), .bool(false), .null,
                                    .binary([]), .binary([1, 2, 3, 4]), .timestamp(try Timestamp(seconds: -5, nanoseconds: 7)),
                                    .objectId(try ObjectId(hex: "ffffffffffffffffffffffff")),
                                    .uuid(try FerryUUID(string: "00000000-0000-0000-0000-000000000001"))]
        for v in values {
            var out: [UInt8] = []
            ExtendedJSON.appendArgument(v, to: &out)
            #expect(try ExtendedJSON.value(ExtendedJSON.parse(out)) == v, "\(String(decoding: out, as: UTF8.self))")
        }
        for bytes: [UInt8] in [[], [0], [0, 1], [0, 1, 2], Array(0...255)] {
            #expect(ExtendedJSON.base64Decode(ExtendedJSON.base64Encode(bytes)) == bytes)
        }
    }

    // MARK: against a scripted server

    static func app(_ server: ScriptedHTTPServer, _ name: String) throws -> App {
        try App(App.Configuration(appId: "remote-app", baseURL: "http://127.0.0.1:\(server.port)",
                                  baseDirectory: SyncTestServer.temporaryDirectory(name), logLevel: .warn))
    }

    static func loggedIn(_ app: App) async throws -> SyncUser {
        try await withCheckedContinuation { c in app.login(.anonymous) { c.resume(returning: $0) } }.get()
    }

    static func find(_ app: App, _ user: SyncUser, limit: Int) async -> Result<[ExtendedJSON.Document], FerryError> {
        await withCheckedContinuation { c in
            do { try app.remoteFind(user: user, RemoteQuery(className: "Item"), limit: limit) { c.resume(returning: $0) } } catch {
                c.resume(returning: .failure(error as? FerryError ?? FerryError(.internal, "\(error)")))
            }
        }
    }

    static func count(_ app: App, _ user: SyncUser) async -> Result<Int, FerryError> {
        await withCheckedContinuation { c in
            do { try app.remoteCount(user: user, RemoteQuery(className: "Item", filter: "a == $0", arguments: [.int(.min)])) { c.resume(returning: $0) } } catch {
                c.resume(returning: .failure(error as? FerryError ?? FerryError(.internal, "\(error)")))
            }
        }
    }

    static let login = (200, #"{"user_id":"u1","access_token":"old","refresh_token":"r1"}"#)

    @Test func anExpiredTokenIsRefreshedOnceAndThePagesFollowed() async throws {
        let server = try ScriptedHTTPServer { request in
            if request.path.hasSuffix("/login") { return Self.login }
            if request.path.hasSuffix("/auth/session") {
                return request.authorization == "Bearer r1" ? (200, #"{"access_token":"new"}"#) : (401, "{}")
            }
            guard request.authorization == "Bearer new" else { return (401, #"{"error":"token expired","error_code":"InvalidSession"}"#) }
            if request.path.hasSuffix("/action/count") {
                return request.body.contains(#""after":"k""#) ? (200, #"{"count":2}"#) : (200, #"{"count":100000,"next":"k"}"#)
            }
            // An empty page with a cursor, then two documents of which the limit takes one.
            if !request.body.contains("after") { return (200, #"{"documents":[],"next":"p1"}"#) }
            return (200, #"{"documents":[{"_id":1},{"_id":2}],"next":"p2"}"#)
        }
        defer { server.stop() }
        let app = try Self.app(server, "remote-refresh")
        defer { app.close() }
        let user = try await Self.loggedIn(app)
        let docs = try await Self.find(app, user, limit: 1).get()
        #expect(docs.map { $0.value("_id") } == [.int(1)])
        #expect(user.accessToken == "new")
        let paths = server.requests.map { "\($0.path.split(separator: "/").suffix(2).joined(separator: "/")) \($0.authorization)" }
        #expect(paths == ["anon-user/login ", "action/find Bearer old", "auth/session Bearer r1", "action/find Bearer new", "action/find Bearer new"])
        let bodies = server.requests.filter { $0.path.hasSuffix("/find") }.map(\.body)
        #expect(bodies.last == #"{"class":"Item","filter":"TRUEPREDICATE","arguments":[],"limit":1,"after":"p1"}"#)
        // count adds the pages up, and sends its argument exactly
        #expect(try await Self.count(app, user).get() == 100_002)
        #expect(server.requests.last?.body == #"{"class":"Item","filter":"a == $0","arguments":[{"$numberLong":"-9223372036854775808"}],"after":"k"}"#)
    }

    @Test func aRefusedRefreshARepeatedCursorAndAMalformedAnswerFail() async throws {
        let server = try ScriptedHTTPServer { request in
            if request.path.hasSuffix("/login") { return Self.login }
            if request.path.hasSuffix("/auth/session") { return (401, #"{"error":"revoked","error_code":"InvalidSession"}"#) }
            if request.path.hasSuffix("/action/count") { return (200, #"{"count":1,"next":"same"}"#) }
            return (401, "{}")
        }
        defer { server.stop() }
        let app = try Self.app(server, "remote-failures")
        defer { app.close() }
        let user = try await Self.loggedIn(app)
        guard case .failure(let refused) = await Self.find(app, user, limit: 10) else { Issue.record("a refused refresh succeeded"); return }
        #expect(refused.code == .auth, "\(refused)")
        #expect(refused.message.contains("revoked"), "\(refused)")
        guard case .failure(let repeated) = await Self.count(app, user) else { Issue.record("a repeated cursor succeeded"); return }
        #expect(repeated.code == .corrupt, "\(repeated)")

        let broken = try ScriptedHTTPServer { request in
            if request.path.hasSuffix("/login") { return Self.login }
            if request.path.hasSuffix("/action/count") { return (503, #"{"error":"sync is paused","error_code":"SyncPaused"}"#) }
            return (200, #"{"documents":[{"_id":1e999}]}"#)
        }
        defer { broken.stop() }
        let app2 = try Self.app(broken, "remote-broken")
        defer { app2.close() }
        let user2 = try await Self.loggedIn(app2)
        guard case .failure(let malformed) = await Self.find(app2, user2, limit: 10) else { Issue.record("a malformed answer succeeded"); return }
        #expect(malformed.code == .corrupt, "\(malformed)")
        guard case .failure(let paused) = await Self.count(app2, user2) else { Issue.record("a 503 succeeded"); return }
        #expect(paused.code == .sync && paused.message.contains("sync is paused (SyncPaused, HTTP 503)"), "\(paused)")
        // argument checks before anything is sent
        #expect(throws: FerryError.self) { try app2.remoteFind(user: user2, RemoteQuery(className: "Item"), limit: 0) { _ in } }
        #expect(throws: FerryError.self) { try app2.remoteFind(user: user2, RemoteQuery(className: ""), limit: 1) { _ in } }
    }

    @Test func aQueryInFlightWhenTheAppClosesCompletesOnceWithClosed() async throws {
        // The server tells when the query arrived, and answers only once the App closed.
        let arrived = DispatchSemaphore(value: 0), closed = DispatchSemaphore(value: 0)
        let server = try ScriptedHTTPServer { request in
            if request.path.hasSuffix("/login") { return Self.login }
            arrived.signal()
            _ = closed.wait(timeout: .now() + 30)
            return (200, #"{"documents":[]}"#)
        }
        defer {
            closed.signal()
            server.stop()
        }
        let app = try Self.app(server, "remote-close")
        let user = try await Self.loggedIn(app)
        let results = Arrival<[Result<[ExtendedJSON.Document], FerryError>]>()
        let calls = LockedResults()
        try app.remoteFind(user: user, RemoteQuery(className: "Item"), limit: 5) { r in
            calls.append(r)
            results.deliver(calls.all)
        }
        let reached = await withCheckedContinuation { c in
            DispatchQueue.global().async { c.resume(returning: arrived.wait(timeout: .now() + 30) == .success) }
        }
        #expect(reached, "the query never reached the server")
        app.close()
        let first = await results.wait(seconds: 10)
        guard case .failure(let e)? = first?.first else { Issue.record("no .closed completion: \(String(describing: first))"); return }
        #expect(e.code == .closed, "\(e)")
        closed.signal() // the late answer is sent now, and must be dropped
        try await Task.sleep(for: .seconds(1)) // no event says it was: a second completion would show here
        #expect(calls.all.count == 1)
        #expect(throws: FerryError.self) { try app.remoteCount(user: user, RemoteQuery(className: "Item")) { _ in } }
    }
}

final class LockedResults: @unchecked Sendable {
    private let lock = ThreadLock()
    private var results: [Result<[ExtendedJSON.Document], FerryError>] = []
    func append(_ r: Result<[ExtendedJSON.Document], FerryError>) { lock.withLock { results.append(r) } }
    var all: [Result<[ExtendedJSON.Document], FerryError>] { lock.withLock { results } }
}

/// An HTTP server on 127.0.0.1 that answers each request (one per connection, as Ferry's
/// client sends them) from a script, and records the requests. A thread of its own, blocking
/// sockets with a receive timeout.
final class ScriptedHTTPServer: @unchecked Sendable {
    struct Request: Sendable {
        let path: String
        let authorization: String
        let body: String
    }

    let port: Int
    private let listener: Int32
    private let lock = ThreadLock()
    private var recorded: [Request] = []

    var requests: [Request] { lock.withLock { recorded } }

    init(answer: @escaping @Sendable (Request) -> (Int, String)) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = self.listener
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard listener >= 0, ok else { throw CocoaError(.fileReadUnknown) }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                serve(client, answer)
            }
        }
    }

    private func serve(_ client: Int32, _ answer: (Request) -> (Int, String)) {
        defer { close(client) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var head = ""
        var bodyStart = 0
        var bodyLength = 0
        while true {
            let n = read(client, &buffer, buffer.count)
            if n <= 0 { return }
            data += buffer[0..<n]
            let text = String(decoding: data, as: UTF8.self)
            if head.isEmpty, let end = text.range(of: "\r\n\r\n") {
                head = String(text[..<end.lowerBound])
                bodyStart = text.utf8.distance(from: text.startIndex, to: end.upperBound)
                bodyLength = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
            }
            if !head.isEmpty, data.count >= bodyStart + bodyLength { break }
        }
        let lines = head.split(separator: "\r\n")
        let path = lines.first?.split(separator: " ").dropFirst().first.map(String.init) ?? ""
        let authorization = lines.first { $0.lowercased().hasPrefix("authorization:") }
            .map { String($0.dropFirst("authorization:".count).trimmingCharacters(in: .whitespaces)) } ?? ""
        let request = Request(path: path, authorization: authorization,
                              body: String(decoding: data[bodyStart..<bodyStart + bodyLength], as: UTF8.self))
        lock.withLock { recorded.append(request) }
        let (status, body) = answer(request)
        let response = Array("HTTP/1.1 \(status) Scripted\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)".utf8)
        var sent = 0
        while sent < response.count {
            let n = response[sent...].withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            if n <= 0 { return }
            sent += n
        }
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR)) // wakes the blocked accept
        close(listener)
    }
}
