import FerryCore

/// A WebSocket client (RFC 6455) for the sync connection: binary messages over ws or wss,
/// with a required subprotocol. Create, use and release it on the loop thread; its delegate is
/// called there too, never from inside a call into the client.
///
/// - `send` before the connection is open, or after `close()`, drops the message and returns
///   false: the sync layer decides what to resend after it reconnects.
/// - Text messages are delivered like binary ones, as their bytes (not UTF-8 checked).
/// - Pings are answered with pongs; outgoing messages are split into frames of at most
///   `maxFrameSize` bytes, because servers commonly limit frames more than messages.
/// - A message bigger than `maxMessageSize`, or any protocol violation, closes the connection
///   with close code 1009 or 1002, and `webSocketDidClose` gets the error.
public final class WebSocketClient {
    private enum Phase { case idle, connecting, open, closing, closed }

    public weak var delegate: WebSocketDelegate?
    public let url: String
    public let subprotocol: String
    public let headers: [(String, String)]
    public let tls: TLSOptions
    public let maxMessageSize: Int
    /// How long resolving, connecting, TLS and the upgrade may take together.
    public var connectTimeoutMs: UInt64 = 30_000
    /// How long to wait for the server's close frame after `close()` before dropping the connection.
    public var closeTimeoutMs: UInt64 = 5_000
    /// The largest frame payload sent; longer messages are fragmented. Hummingbird's default limit.
    public var maxFrameSize = 16 << 10

    /// The HTTP status of a refused upgrade (e.g. 401), so the caller can tell an auth failure;
    /// nil when the upgrade succeeded or no response arrived. Reset by `connect()`.
    public private(set) var handshakeStatus: Int?
    /// The body of a refused upgrade (at most 1 MiB of it).
    public private(set) var handshakeBody: [UInt8] = []
    /// The status code of the server's close frame, if it sent one with a code.
    public private(set) var closeCode: UInt16?
    /// The reason of the server's close frame.
    public private(set) var closeReason = ""

    private let loop: EventLoop
    private var phase = Phase.idle
    private var transport: Transport?
    private var timer: LoopTimer?
    private var parser = HTTPResponseParser()
    private var responseHead: HTTPResponseParser.Head?
    private var decoder: WebSocketFrameDecoder
    private var key = ""
    private var sentClose = false
    private var failure: FerryError?

    private static let maxHandshakeBody = 1 << 20
    /// Headers the handshake sets itself; a caller's copies are dropped.
    private static let handshakeHeaders: Set<String> = [
        "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions",
    ]

    public init(loop: EventLoop, url: String, subprotocol: String, headers: [(String, String)], tls: TLSOptions = TLSOptions(),
                maxMessageSize: Int = 64 << 20) {
        self.loop = loop
        self.url = url
        self.subprotocol = subprotocol
        self.headers = headers
        self.tls = tls
        self.maxMessageSize = maxMessageSize
        decoder = WebSocketFrameDecoder(maxMessageSize: maxMessageSize)
    }

    deinit {
        transport?.close(graceful: false)
        timer?.invalidate()
    }

    /// Whether the connection is open: after `webSocketDidOpen`, before `close()` or the peer's close.
    public var isOpen: Bool { phase == .open }
    /// The upgrade response's headers (empty before the socket opened).
    public private(set) var responseHeaders: [(String, String)] = []

    /// Resolves, connects, adds TLS for wss, and performs the upgrade (checking the 101 status,
    /// Sec-WebSocket-Accept, and that the server chose `subprotocol`); then `webSocketDidOpen`.
    /// Every connect() ends with exactly one `webSocketDidClose`. Ignored while connecting or open;
    /// after `webSocketDidClose` it may be called again.
    public func connect() {
        guard phase == .idle || phase == .closed else { return }
        phase = .connecting
        handshakeStatus = nil
        handshakeBody = []
        closeCode = nil
        closeReason = ""
        failure = nil
        sentClose = false
        responseHead = nil
        parser = HTTPResponseParser()
        decoder = WebSocketFrameDecoder(maxMessageSize: maxMessageSize)

        let endpoint: Endpoint
        let request: [UInt8]
        do throws(FerryError) {
            endpoint = try Endpoint(parsing: url)
            guard endpoint.isWebSocket else { throw FerryError(.invalidArgument, "WebSocketClient needs a ws or wss URL, not \(url)") }
            key = WebSocketHandshake.makeKey()
            var fields = headers.filter { !Self.handshakeHeaders.contains($0.0.lowercased()) }
            fields += [("Upgrade", "websocket"), ("Sec-WebSocket-Key", key), ("Sec-WebSocket-Version", "13")]
            if !subprotocol.isEmpty { fields.append(("Sec-WebSocket-Protocol", subprotocol)) }
            request = try HTTPRequestHead.encode(method: "GET", endpoint: endpoint, headers: fields, contentLength: nil, connection: "Upgrade")
        } catch {
            failure = error
            phase = .closing
            LoopDeferral.run(on: loop) { [weak self] in self?.finish() }
            return
        }

        let transport = Transport(loop: loop, host: endpoint.host, port: endpoint.port, tls: endpoint.isSecure ? tls : nil)
        self.transport = transport
        transport.onEvent = { [weak self, weak transport] event in
            guard let self else { return }
            switch event {
            case .open: transport?.write(request)
            case .data(let bytes): phase == .connecting ? handshakeData(bytes) : frameData(bytes)
            case .end: peerEnded()
            case .failed(let error): record(error)
            case .closed: finish()
            }
        }
        let timer = LoopTimer(loop: loop)
        self.timer = timer
        if connectTimeoutMs > 0 {
            timer.schedule(afterMilliseconds: connectTimeoutMs) { [weak self] in
                guard let self, phase == .connecting else { return }
                record(FerryError(.io, "WebSocket connection to \(url) timed out after \(connectTimeoutMs) ms"))
                self.transport?.close(graceful: false)
            }
        }
        transport.open()
    }

    /// Sends one binary message (masked, fragmented above `maxFrameSize`). Returns false, and
    /// drops the message, unless the connection is open.
    @discardableResult
    public func send(_ message: [UInt8]) -> Bool {
        guard phase == .open, let transport else { return false }
        transport.write(WebSocketFrameEncoder.message(.binary, payload: message, maxFrameSize: maxFrameSize,
                                                      maskingKey: WebSocketHandshake.maskingKey))
        return true
    }

    /// Sends a close frame (1000) and closes once the server answers (or after `closeTimeoutMs`);
    /// before the connection is open, drops it at once. `webSocketDidClose` follows with a nil
    /// error unless something had already failed. Does nothing when not connecting or open.
    public func close() {
        switch phase {
        case .idle, .closing, .closed:
            return
        case .connecting:
            phase = .closing
            transport?.close(graceful: false)
        case .open:
            sendClose(code: 1000)
            phase = .closing
            scheduleCloseTimeout()
        }
    }

    /// Drops the connection at once, without a closing handshake (a peer that stopped
    /// answering would not finish one); `webSocketDidClose` follows with `error`.
    public func abort(_ error: FerryError) {
        switch phase {
        case .idle, .closed: return
        case .connecting, .open, .closing: fail(error)
        }
    }

    // MARK: - Handshake

    private func handshakeData(_ bytes: [UInt8]) {
        do {
            handshake(try parser.feed(bytes))
        } catch {
            fail(FerryError(.io, "malformed WebSocket upgrade response from \(url): \(error.message)"))
        }
    }

    private func handshake(_ events: [HTTPResponseParser.Event]) {
        for event in events {
            switch event {
            case .head(let head):
                responseHead = head
                if head.status != 101 { handshakeStatus = head.status }
            case .body(let bytes):
                handshakeBody += bytes.prefix(max(0, Self.maxHandshakeBody - handshakeBody.count))
            case .end:
                guard let head = responseHead else { return }
                if head.status != 101 {
                    fail(FerryError(.io, "WebSocket upgrade to \(url) refused with HTTP \(head.status)"))
                    return
                }
                if let problem = check(head) {
                    fail(FerryError(.io, "WebSocket upgrade to \(url) failed: \(problem)"))
                    return
                }
                phase = .open
                responseHeaders = head.headers
                timer?.cancel()
                let leftover = parser.leftover
                delegate?.webSocketDidOpen(self)
                if !leftover.isEmpty { frameData(leftover) }
                return
            }
        }
    }

    /// Why a 101 response is not a valid upgrade for this request, or nil.
    private func check(_ head: HTTPResponseParser.Head) -> String? {
        guard head.header("upgrade")?.lowercased() == "websocket" else { return "no Upgrade: websocket header" }
        let connection = head.header("connection")?.lowercased().split(separator: ",").map { $0.filter { $0 != " " && $0 != "\t" } } ?? []
        guard connection.contains("upgrade") else { return "no Connection: Upgrade header" }
        guard head.header("sec-websocket-accept") == WebSocketHandshake.expectedAccept(forKey: key) else {
            return "wrong Sec-WebSocket-Accept"
        }
        let chosen = head.header("sec-websocket-protocol")
        if subprotocol.isEmpty {
            if let chosen { return "the server chose subprotocol \(chosen), none was offered" }
        } else if chosen != subprotocol {
            return chosen.map { "the server chose subprotocol \($0) instead of \(subprotocol)" }
                ?? "the server did not accept subprotocol \(subprotocol)"
        }
        if head.header("sec-websocket-extensions") != nil { return "the server chose an extension, none was offered" }
        return nil
    }

    // MARK: - Frames

    private func frameData(_ bytes: [UInt8]) {
        guard phase == .open || phase == .closing else { return }
        let events: [WebSocketFrameDecoder.Event]
        do {
            events = try decoder.feed(bytes)
        } catch {
            record(FerryError(.io, "WebSocket protocol error from \(url): \(error.message)"))
            if !sentClose { sendClose(code: error.closeCode) }
            phase = .closing
            transport?.close(graceful: true)
            scheduleCloseTimeout()
            return
        }
        for event in events {
            switch event {
            case .message(_, let payload):
                if phase == .open { delegate?.webSocket(self, didReceive: payload) }
            case .ping(let payload):
                if phase == .open { sendFrame(.pong, payload) }
            case .pong:
                break
            case .close(let code, let reason):
                closeCode = code
                closeReason = String(decoding: reason, as: UTF8.self)
                if let code, code != 1000, phase == .open {
                    record(FerryError(.io, "the server closed the WebSocket with code \(code)\(closeReason.isEmpty ? "" : ": \(closeReason)")"))
                }
                if !sentClose {
                    sentClose = true
                    sendFrame(.close, code.map { WebSocketFrameEncoder.closePayload(code: $0) } ?? [])
                }
                phase = .closing
                transport?.close(graceful: true)
                scheduleCloseTimeout()
            }
        }
    }

    private func peerEnded() {
        switch phase {
        case .connecting:
            // A refused upgrade may end its body with the connection.
            if let events = try? parser.finishAtEndOfStream() { handshake(events) }
            record(FerryError(.io, "the connection to \(url) closed during the WebSocket upgrade"))
        case .open:
            record(FerryError(.io, "the connection to \(url) closed without a WebSocket close frame"))
        case .idle, .closing, .closed:
            break
        }
    }

    private func sendFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8]) {
        transport?.write(WebSocketFrameEncoder.frame(opcode, payload: payload[...], maskingKey: WebSocketHandshake.maskingKey()))
    }

    private func sendClose(code: UInt16) {
        guard !sentClose else { return }
        sentClose = true
        sendFrame(.close, WebSocketFrameEncoder.closePayload(code: code))
    }

    private func scheduleCloseTimeout() {
        timer?.schedule(afterMilliseconds: closeTimeoutMs) { [weak self] in self?.transport?.close(graceful: false) }
    }

    /// Keeps the first error; it goes to `webSocketDidClose`.
    private func record(_ error: FerryError) {
        if failure == nil { failure = error }
    }

    private func fail(_ error: FerryError) {
        record(error)
        phase = .closing
        transport?.close(graceful: false)
    }

    private func finish() {
        timer?.invalidate()
        timer = nil
        transport = nil
        phase = .closed
        let error = failure
        failure = nil
        delegate?.webSocketDidClose(self, error: error)
    }
}
