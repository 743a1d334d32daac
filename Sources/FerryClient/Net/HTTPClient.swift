import FerryCore

/// A minimal HTTP/1.1 client for the auth and admin calls the sync client makes: one request per
/// connection, no redirects, no keep-alive, no compression.
public enum HTTPClient {
    /// The largest response body accepted; a bigger one fails the request instead of filling memory.
    public static let maxResponseBodySize = 64 << 20

    /// Sends one request on a new connection (with `Connection: close`) and reads a response
    /// delimited by Content-Length, chunked coding or the end of the connection.
    ///
    /// Call on the loop thread. `completion` runs exactly once, on the loop thread and never
    /// from inside this call: with the response whatever its status, or an error (invalid URL or
    /// header → `.invalidArgument`; resolve, connect, TLS, malformed response, timeout → `.io`).
    /// `timeoutMs` covers everything from resolving the host to the last byte; 0 means none.
    public static func send(_ request: HTTPRequest, on loop: EventLoop, tls: TLSOptions = TLSOptions(), timeoutMs: UInt64 = 60_000,
                            completion: @escaping (Result<HTTPResponse, FerryError>) -> Void) {
        HTTPExchange(loop: loop, request: request, tls: tls, timeoutMs: timeoutMs, completion: completion).start()
    }
}
