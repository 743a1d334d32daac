import FerryCore

/// A byte stream to a host: TCP, with TLS layered on when the endpoint is secure. HTTP and
/// WebSocket sit on top of it and see the same events either way; `.open` comes after the TLS
/// handshake, and `.closed` is always last, exactly once after `open()`.
final class Transport {
    enum Event {
        case open
        case data([UInt8])
        /// The peer finished (TCP end, or TLS close_notify); the transport then closes.
        case end
        case failed(FerryError)
        case closed
    }

    var onEvent: ((Event) -> Void)?

    private let tcp: TCPConnection
    private let host: String
    private let port: Int
    private let tlsOptions: TLSOptions?
    private var tls: TLSSession?
    private var isOpen = false
    private var isDone = false

    /// `tls` nil means plain TCP.
    init(loop: EventLoop, host: String, port: Int, tls: TLSOptions?) {
        tcp = TCPConnection(loop: loop)
        self.host = host
        self.port = port
        tlsOptions = tls
    }

    func open() {
        // The TCP connection holds this transport until it reports `.closed`, then lets go.
        tcp.onEvent = { [self] event in tcpEvent(event) }
        tcp.connect(host: host, port: port)
    }

    func write(_ bytes: [UInt8]) {
        guard isOpen, !isDone else { return }
        guard let tls else {
            tcp.write(bytes)
            return
        }
        do {
            try tls.send(bytes)
            tcp.write(tls.takeOutgoing())
        } catch {
            fail(error)
        }
    }

    /// `graceful` sends what is queued (and TLS close_notify) before closing.
    func close(graceful: Bool) {
        isDone = true
        if graceful, isOpen, let tls {
            tls.shutdown()
            tcp.write(tls.takeOutgoing())
        }
        tcp.close(graceful: graceful)
    }

    private func tcpEvent(_ event: TCPConnection.Event) {
        switch event {
        case .connected:
            guard let options = tlsOptions else {
                isOpen = true
                emit(.open)
                return
            }
            do {
                let session = try TLSSession(host: host, options: options)
                tls = session
                try session.handshake()
                tcp.write(session.takeOutgoing())
            } catch {
                fail(error)
            }
        case .data(let bytes):
            guard !isDone else { return }
            guard let tls else {
                emit(.data(bytes))
                return
            }
            do {
                let wasEstablished = tls.isEstablished
                let (plaintext, peerClosed) = try tls.receive(bytes)
                tcp.write(tls.takeOutgoing())
                if !wasEstablished && tls.isEstablished {
                    isOpen = true
                    emit(.open)
                }
                if !plaintext.isEmpty && !isDone { emit(.data(plaintext)) }
                if peerClosed && !isDone {
                    emit(.end)
                    close(graceful: true)
                }
            } catch {
                fail(error)
            }
        case .end:
            guard !isDone else { return }
            isDone = true
            emit(.end)
        case .failed(let error):
            guard !isDone else { return }
            isDone = true
            emit(.failed(error))
        case .closed:
            isOpen = false
            let handler = onEvent
            onEvent = nil
            handler?(.closed)
        }
    }

    private func fail(_ error: FerryError) {
        guard !isDone else { return }
        isDone = true
        emit(.failed(error))
        tcp.close(graceful: false)
    }

    private func emit(_ event: Event) {
        onEvent?(event)
    }
}
