import FerryCore

/// One request and its response on its own connection: the state behind `HTTPClient.send`.
/// The transport's event handler holds the exchange until the connection has closed, and the
/// completion runs from that final event, so it runs once and after every handle is released.
final class HTTPExchange {
    private let loop: EventLoop
    private let request: HTTPRequest
    private let tls: TLSOptions
    private let timeoutMs: UInt64
    private var completion: ((Result<HTTPResponse, FerryError>) -> Void)?
    private var parser: HTTPResponseParser
    private var transport: Transport?
    private var timer: LoopTimer?
    private var head: HTTPResponseParser.Head?
    private var body: [UInt8] = []
    private var result: Result<HTTPResponse, FerryError>?

    init(loop: EventLoop, request: HTTPRequest, tls: TLSOptions, timeoutMs: UInt64,
         completion: @escaping (Result<HTTPResponse, FerryError>) -> Void) {
        self.loop = loop
        self.request = request
        self.tls = tls
        self.timeoutMs = timeoutMs
        self.completion = completion
        parser = HTTPResponseParser(requestMethod: request.method)
    }

    func start() {
        let endpoint: Endpoint
        let requestBytes: [UInt8]
        do throws(FerryError) {
            endpoint = try Endpoint(parsing: request.url)
            guard !endpoint.isWebSocket else {
                throw FerryError(.invalidArgument, "HTTPClient needs an http or https URL, not \(request.url)")
            }
            let method = request.method.uppercased()
            let sendsLength = !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(method)
            requestBytes = try HTTPRequestHead.encode(method: request.method, endpoint: endpoint, headers: request.headers,
                                                      contentLength: sendsLength ? request.body.count : nil,
                                                      connection: "close") + request.body
        } catch {
            let failure = error
            LoopDeferral.run(on: loop) { [self] in complete(.failure(failure)) }
            return
        }
        let transport = Transport(loop: loop, host: endpoint.host, port: endpoint.port, tls: endpoint.isSecure ? tls : nil)
        self.transport = transport
        transport.onEvent = { [self] event in
            switch event {
            case .open: transport.write(requestBytes)
            case .data(let bytes): received(bytes)
            case .end: ended()
            case .failed(let error): settle(.failure(error))
            case .closed: complete(result ?? .failure(FerryError(.io, "connection to \(request.url) closed")))
            }
        }
        if timeoutMs > 0 {
            let timer = LoopTimer(loop: loop)
            self.timer = timer
            timer.schedule(afterMilliseconds: timeoutMs) { [self] in
                settle(.failure(FerryError(.io, "\(request.method) \(request.url) timed out after \(timeoutMs) ms")))
                transport.close(graceful: false)
            }
        }
        transport.open()
    }

    private func received(_ bytes: [UInt8]) {
        guard result == nil else { return }
        do {
            try handle(parser.feed(bytes))
        } catch {
            fail("malformed response: \(error.message)")
        }
    }

    private func ended() {
        guard result == nil else { return }
        do {
            try handle(parser.finishAtEndOfStream())
        } catch {
            fail(error.message)
        }
    }

    private func handle(_ events: [HTTPResponseParser.Event]) {
        for event in events {
            switch event {
            case .head(let received):
                head = received
            case .body(let bytes):
                guard body.count + bytes.count <= HTTPClient.maxResponseBodySize else {
                    fail("response body larger than \(HTTPClient.maxResponseBodySize) bytes")
                    return
                }
                body += bytes
            case .end:
                guard let head else { return }
                settle(.success(HTTPResponse(status: head.status, headers: head.headers, body: body)))
                transport?.close(graceful: false)
            }
        }
    }

    private func fail(_ message: String) {
        settle(.failure(FerryError(.io, "\(request.method) \(request.url): \(message)")))
        transport?.close(graceful: false)
    }

    /// Records the outcome; the first one wins, and it is delivered when the connection has closed.
    private func settle(_ outcome: Result<HTTPResponse, FerryError>) {
        if result == nil { result = outcome }
    }

    private func complete(_ outcome: Result<HTTPResponse, FerryError>) {
        timer?.invalidate()
        timer = nil
        transport = nil
        guard let completion else { return }
        self.completion = nil
        completion(outcome)
    }
}
