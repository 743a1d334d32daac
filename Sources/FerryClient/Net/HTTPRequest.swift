/// One HTTP request for `HTTPClient.send`. The client sets Host, Content-Length and
/// Connection itself; same-named entries in `headers` are ignored.
public struct HTTPRequest: Sendable {
    public var method: String
    /// An http or https URL.
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}
