import FerryCore

/// A query of the server's data, run online by the server with a user's rules (the seeds'
/// MongoClient path, issue 24): nothing is subscribed and nothing is stored on the device.
public struct RemoteQuery: Sendable {
    public var className: String
    /// Ferry's query language (`TRUEPREDICATE` for every object); no SORT or LIMIT.
    public var filter: String
    /// The values of `$0`, `$1`, ...
    public var arguments: [FerryValue]

    public init(className: String, filter: String = "TRUEPREDICATE", arguments: [FerryValue] = []) {
        self.className = className
        self.filter = filter
        self.arguments = arguments
    }
}

/// A remote call's completion: claimed once, by the answer or by the App's close.
final class RemoteCall: @unchecked Sendable {
    private let lock = ThreadLock()
    private var fail: (@Sendable (FerryError) -> Void)?

    init(_ fail: @escaping @Sendable (FerryError) -> Void) { self.fail = fail }

    /// True the first time only: the caller then completes the call.
    func claim() -> Bool {
        lock.withLock {
            defer { fail = nil }
            return fail != nil
        }
    }

    /// Ends the call with an error unless it was already claimed.
    func abandon(_ error: FerryError) {
        let f: (@Sendable (FerryError) -> Void)? = lock.withLock {
            defer { fail = nil }
            return fail
        }
        f?(error)
    }

    var isDone: Bool { lock.withLock { fail == nil } }
}

extension App {
    /// The most objects one `remoteFind` returns.
    public static let remoteFindMaxLimit = 100_000
    /// Objects per request: the Data API's own maximum.
    static let remotePageSize = 1000

    /// The objects of `query.className` the server holds that match `query` and that `user`'s
    /// rules let it read, in primary-key order, at most `limit` (1 to `remoteFindMaxLimit`),
    /// fetched page by page (following the server's cursors). Throws at once for a bad
    /// argument, a user of another App or logged out, a closed App; otherwise `completion`
    /// runs exactly once on the loop thread.
    public func remoteFind(user: SyncUser, _ query: RemoteQuery, limit: Int,
                           completion: @escaping @Sendable (Result<[ExtendedJSON.Document], FerryError>) -> Void) throws {
        guard (1...Self.remoteFindMaxLimit).contains(limit) else {
            throw FerryError(.invalidArgument, "limit must be between 1 and \(Self.remoteFindMaxLimit), got \(limit)")
        }
        let call = try startRemoteCall(user: user, query) { completion(.failure($0)) }
        loop.post { [self] in
            findPage(user, query, limit: limit, after: nil, collected: [], call: call, completion: completion)
        }
    }

    /// How many objects of `query.className` the server holds that match `query` and that
    /// `user`'s rules let it read (the server counts a large class over several requests,
    /// which this adds up). Throws and completes as `remoteFind`.
    public func remoteCount(user: SyncUser, _ query: RemoteQuery, completion: @escaping @Sendable (Result<Int, FerryError>) -> Void) throws {
        let call = try startRemoteCall(user: user, query) { completion(.failure($0)) }
        loop.post { [self] in countPage(user, query, after: nil, total: 0, call: call, completion: completion) }
    }

    private func startRemoteCall(user: SyncUser, _ query: RemoteQuery, fail: @escaping @Sendable (FerryError) -> Void) throws -> RemoteCall {
        guard user.app === self else { throw FerryError(.invalidArgument, "the user belongs to another App") }
        guard !query.className.isEmpty else { throw FerryError(.invalidArgument, "the class name is empty") }
        guard user.isLoggedIn else { throw FerryError(.auth, "user \(user.id) is logged out; log in again to query the server") }
        let call = RemoteCall(fail)
        guard registerRemoteCall(call) else { throw FerryError(.closed, "the App is closed") }
        return call
    }

    private func findPage(_ user: SyncUser, _ query: RemoteQuery, limit: Int, after: String?, collected: [ExtendedJSON.Document],
                          call: RemoteCall, completion: @escaping @Sendable (Result<[ExtendedJSON.Document], FerryError>) -> Void) {
        let want = min(Self.remotePageSize, limit - collected.count)
        dataAPI(user, "find", body(query, limit: want, after: after), call: call) { [self] result in
            let page: ExtendedJSON.FindPage
            do { page = try ExtendedJSON.findPage(try result.get()) } catch {
                return finish(call) { completion(.failure(error as? FerryError ?? FerryError(.internal, "\(error)"))) }
            }
            let documents = collected + page.documents.prefix(limit - collected.count)
            guard documents.count < limit, let next = page.next else { return finish(call) { completion(.success(documents)) } }
            guard next != after else {
                return finish(call) { completion(.failure(FerryError(.corrupt, "the server's find answered the same cursor again"))) }
            }
            findPage(user, query, limit: limit, after: next, collected: documents, call: call, completion: completion)
        }
    }

    private func countPage(_ user: SyncUser, _ query: RemoteQuery, after: String?, total: Int, call: RemoteCall,
                           completion: @escaping @Sendable (Result<Int, FerryError>) -> Void) {
        dataAPI(user, "count", body(query, limit: nil, after: after), call: call) { [self] result in
            let page: ExtendedJSON.CountPage
            do { page = try ExtendedJSON.countPage(try result.get()) } catch {
                return finish(call) { completion(.failure(error as? FerryError ?? FerryError(.internal, "\(error)"))) }
            }
            let (sum, overflow) = total.addingReportingOverflow(page.count)
            guard !overflow else { return finish(call) { completion(.failure(FerryError(.corrupt, "the server's counts add up past Int.max"))) } }
            guard let next = page.next else { return finish(call) { completion(.success(sum)) } }
            guard next != after else {
                return finish(call) { completion(.failure(FerryError(.corrupt, "the server's count answered the same cursor again"))) }
            }
            countPage(user, query, after: next, total: sum, call: call, completion: completion)
        }
    }

    /// Runs `deliver` if the call was not already ended (by the App's close), and forgets it.
    private func finish(_ call: RemoteCall, _ deliver: () -> Void) {
        forgetRemoteCall(call)
        if call.claim() { deliver() }
    }

    private func body(_ q: RemoteQuery, limit: Int?, after: String?) -> [UInt8] {
        var out: [UInt8] = Array(#"{"class":"#.utf8)
        JSONText.appendQuoted(q.className, to: &out)
        out += Array(#","filter":"#.utf8)
        JSONText.appendQuoted(q.filter, to: &out)
        out += Array(#","arguments":["#.utf8)
        for (n, a) in q.arguments.enumerated() {
            if n > 0 { out.append(UInt8(ascii: ",")) }
            ExtendedJSON.appendArgument(a, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        if let limit { out += Array(#","limit":"#.utf8) + Array(String(limit).utf8) }
        if let after {
            out += Array(#","after":"#.utf8)
            JSONText.appendQuoted(after, to: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// One Data API call as `user` (loop thread): the answer's body for a 2xx, else the
    /// server's error as a FerryError. A 401 refreshes the access token and tries once more.
    private func dataAPI(_ user: SyncUser, _ action: String, _ body: [UInt8], call: RemoteCall, refreshed: Bool = false,
                         completion: @escaping (Result<[UInt8], FerryError>) -> Void) {
        guard !call.isDone else { return }
        guard user.isLoggedIn else { return completion(.failure(FerryError(.auth, "user \(user.id) logged out during the query"))) }
        let url = configuration.baseURL.trimmingSuffix("/") + "/api/data/v1/app/\(configuration.appId)/action/\(action)"
        let request = HTTPRequest(method: "POST", url: url,
                                  headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(user.accessToken)")], body: body)
        HTTPClient.send(request, on: loop, tls: configuration.tls, timeoutMs: configuration.requestTimeoutMs) { [self] result in
            let response: HTTPResponse
            switch result.mapError(Self.network) {
            case .failure(let e): return completion(.failure(e))
            case .success(let r): response = r
            }
            if (200..<300).contains(response.status) { return completion(.success(response.body)) }
            if response.status == 401 && !refreshed {
                return refreshAccessToken(user) { [self] refresh in
                    if case .failure(let e) = refresh {
                        return completion(.failure(FerryError(e.code, "could not \(action) on the server: the access token was refused and "
                                                              + "its refresh failed: \(e.message)")))
                    }
                    dataAPI(user, action, body, call: call, refreshed: true, completion: completion)
                }
            }
            completion(.failure(Self.dataAPIError(response, action: action)))
        }
    }

    /// The server's refusal of a Data API call as Ferry's error: 401/403 an auth error, an
    /// unknown class `noSuchClass`, a 400 (a filter or an argument the server refuses) a
    /// query error, anything else (the Data API off, an unknown app, sync paused: 503) a sync
    /// error; the message is the server's, with its code and status.
    static func dataAPIError(_ r: HTTPResponse, action: String) -> FerryError {
        let json = (try? JSON.parse(r.body)) ?? .null // an answer without a JSON body: its status says it all
        let message = json["error"]?.stringValue ?? "HTTP \(r.status)"
        let code = json["error_code"]?.stringValue ?? "HTTP\(r.status)"
        let text = "the server refused the \(action): \(message) (\(code), HTTP \(r.status))"
        switch r.status {
        case 401, 403: return FerryError(.auth, text)
        case 404 where code == "ClassNotFound": return FerryError(.noSuchClass, text)
        case 400: return FerryError(.query, text)
        default: return FerryError(.sync, text)
        }
    }
}
