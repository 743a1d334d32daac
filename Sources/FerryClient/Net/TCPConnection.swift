import CLibUV
import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection on the loop thread: resolves the host (uv_getaddrinfo), tries each address
/// in turn, reads and writes. Every libuv call of the network stack goes through here and
/// `LoopTimer`.
///
/// Events arrive through `onEvent`, and `.closed` is always the last one, exactly once after
/// `connect`, from a libuv callback (never from inside a call into this object). Each open handle
/// holds a reference to its connection, released in its close callback, so the connection lives
/// until libuv is done with it whoever else lets go.
final class TCPConnection {
    enum Event {
        case connected
        case data([UInt8])
        /// The peer finished sending; the connection then closes.
        case end
        /// The connection failed (resolve, connect, read or write); it then closes.
        case failed(FerryError)
        case closed
    }

    var onEvent: ((Event) -> Void)?

    private let loop: EventLoop
    private var description = ""
    private var resolveRequest: UnsafeMutablePointer<uv_getaddrinfo_t>?
    private var handle: UnsafeMutablePointer<uv_tcp_t>?
    private var addresses: [sockaddr_storage] = []
    private var nextAddress = 0
    private var lastConnectError: FerryError?
    private var isConnected = false
    private var isClosing = false
    private var reportedClosed = false
    private var pendingWrites = 0
    private var shutdownRequested = false

    init(loop: EventLoop) { self.loop = loop }

    func connect(host: String, port: Int) {
        guard resolveRequest == nil, handle == nil, !isClosing else { return }
        description = "\(host):\(port)"
        let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(self).toOpaque()
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        let rc = uv_getaddrinfo(loop.uvLoop, request, { request, status, result in
            guard let request, let data = request.pointee.data else { return }
            let connection = Unmanaged<TCPConnection>.fromOpaque(data).takeRetainedValue()
            request.deallocate()
            connection.resolved(status: status, result: result)
            uv_freeaddrinfo(result)
        }, host, String(port), &hints)
        if rc != 0 {
            Unmanaged<TCPConnection>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            fail(Self.error(rc, "cannot resolve \(host)"))
            return
        }
        resolveRequest = request
    }

    /// Sends bytes in order; ignored unless connected. A failed write fails the connection.
    func write(_ bytes: [UInt8]) {
        guard isConnected, !isClosing, !bytes.isEmpty, let handle else { return }
        let stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
        var start = 0
        while start < bytes.count {
            // uv_buf_t lengths are 32-bit here; a huge write goes out in pieces.
            let count = min(bytes.count - start, 1 << 30)
            let headerSize = MemoryLayout<uv_write_t>.stride
            let block = UnsafeMutableRawPointer.allocate(byteCount: headerSize + count, alignment: 16)
            let request = block.bindMemory(to: uv_write_t.self, capacity: 1)
            let data = block + headerSize
            bytes.withUnsafeBytes { data.copyMemory(from: $0.baseAddress! + start, byteCount: count) }
            var buffer = uv_buf_init(data.assumingMemoryBound(to: CChar.self), UInt32(count))
            let rc = uv_write(request, stream, &buffer, 1) { request, status in
                guard let request else { return }
                let stream = request.pointee.handle
                UnsafeMutableRawPointer(request).deallocate()
                guard let data = stream?.pointee.data else { return }
                Unmanaged<TCPConnection>.fromOpaque(data).takeUnretainedValue().written(status: status)
            }
            if rc != 0 {
                block.deallocate()
                fail(Self.error(rc, "cannot write to \(description)"))
                return
            }
            pendingWrites += 1
            start += count
        }
    }

    /// Closes the connection. `graceful` lets writes already queued go out first (then the
    /// socket is shut down for writing and closed); otherwise they are dropped.
    func close(graceful: Bool) {
        if isClosing {
            if !graceful { closeNow() }
            return
        }
        isClosing = true
        if graceful, isConnected, pendingWrites > 0, let handle {
            shutdownRequested = true
            let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
            let rc = uv_shutdown(request, UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)) { request, _ in
                guard let request else { return }
                let stream = request.pointee.handle
                request.deallocate()
                guard let data = stream?.pointee.data else { return }
                Unmanaged<TCPConnection>.fromOpaque(data).takeUnretainedValue().closeNow()
            }
            if rc == 0 { return }
            request.deallocate()
        }
        closeNow()
    }

    // MARK: - libuv callbacks

    private func resolved(status: Int32, result: UnsafeMutablePointer<addrinfo>?) {
        resolveRequest = nil
        if isClosing {
            reportClosed() // close() cancelled the lookup
            return
        }
        guard status == 0 else {
            fail(Self.error(status, "cannot resolve \(description)"))
            return
        }
        var entry = result
        while let info = entry {
            if let address = info.pointee.ai_addr, info.pointee.ai_addrlen > 0 {
                var storage = sockaddr_storage()
                let size = min(Int(info.pointee.ai_addrlen), MemoryLayout<sockaddr_storage>.size)
                withUnsafeMutableBytes(of: &storage) { $0.baseAddress!.copyMemory(from: address, byteCount: size) }
                addresses.append(storage)
            }
            entry = info.pointee.ai_next
        }
        tryNextAddress()
    }

    private func tryNextAddress() {
        guard nextAddress < addresses.count else {
            fail(lastConnectError ?? FerryError(.io, "cannot resolve \(description): no addresses"))
            return
        }
        var address = addresses[nextAddress]
        nextAddress += 1
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(loop.uvLoop, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        self.handle = handle
        uv_tcp_nodelay(handle, 1)
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                uv_tcp_connect(request, handle, address) { request, status in
                    guard let request else { return }
                    let stream = request.pointee.handle
                    request.deallocate()
                    guard let stream, let data = stream.pointee.data else { return }
                    Unmanaged<TCPConnection>.fromOpaque(data).takeUnretainedValue()
                        .connected(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_tcp_t.self), status: status)
                }
            }
        }
        if rc != 0 {
            request.deallocate()
            attemptFailed(handle, status: rc)
        }
    }

    private func connected(_ attempt: UnsafeMutablePointer<uv_tcp_t>, status: Int32) {
        guard attempt == handle, !isClosing else { return }
        guard status == 0 else {
            attemptFailed(attempt, status: status)
            return
        }
        isConnected = true
        uv_tcp_nodelay(attempt, 1)
        let stream = UnsafeMutableRawPointer(attempt).assumingMemoryBound(to: uv_stream_t.self)
        let rc = uv_read_start(stream, { _, _, buffer in
            guard let buffer else { return }
            let size = 64 << 10
            let base = malloc(size) // nil gives libuv a zero-length buffer: it reports UV_ENOBUFS
            buffer.pointee = uv_buf_init(base?.assumingMemoryBound(to: CChar.self), base == nil ? 0 : UInt32(size))
        }, { stream, count, buffer in
            defer { if let base = buffer?.pointee.base { free(base) } }
            guard let stream, let data = stream.pointee.data else { return }
            let connection = Unmanaged<TCPConnection>.fromOpaque(data).takeUnretainedValue()
            if count > 0, let base = buffer?.pointee.base {
                connection.received(Array(UnsafeBufferPointer(start: UnsafeRawPointer(base).assumingMemoryBound(to: UInt8.self), count: count)))
            } else if count == Int(UV_EOF.rawValue) {
                connection.peerEnded()
            } else if count < 0 {
                connection.fail(TCPConnection.error(Int32(truncatingIfNeeded: count), "cannot read from \(connection.description)"))
            }
        })
        guard rc == 0 else {
            fail(Self.error(rc, "cannot read from \(description)"))
            return
        }
        onEvent?(.connected)
    }

    /// One address failed: close its handle (it frees itself) and try the next one.
    private func attemptFailed(_ attempt: UnsafeMutablePointer<uv_tcp_t>, status: Int32) {
        lastConnectError = Self.error(status, "cannot connect to \(description)")
        handle = nil
        Self.closeHandle(attempt)
        tryNextAddress()
    }

    private func received(_ bytes: [UInt8]) {
        guard !isClosing else { return }
        onEvent?(.data(bytes))
    }

    private func peerEnded() {
        guard !isClosing else { return }
        onEvent?(.end)
        close(graceful: true)
    }

    private func written(status: Int32) {
        pendingWrites -= 1
        if status < 0 && status != Int32(UV_ECANCELED.rawValue) {
            fail(Self.error(status, "cannot write to \(description)"))
        }
    }

    private func fail(_ error: FerryError) {
        guard !isClosing else { return }
        onEvent?(.failed(error))
        closeNow()
    }

    /// Closes whatever is open; `.closed` follows from the last libuv callback.
    private func closeNow() {
        isClosing = true
        if let request = resolveRequest {
            // The lookup's callback still runs (with UV_EAI_CANCELED) and reports `.closed`.
            uv_cancel(UnsafeMutableRawPointer(request).assumingMemoryBound(to: uv_req_t.self))
        } else if let handle {
            let raw = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
            if uv_is_closing(raw) == 0 {
                uv_close(raw) { closed in
                    guard let closed, let data = closed.pointee.data else { return }
                    let connection = Unmanaged<TCPConnection>.fromOpaque(data).takeRetainedValue()
                    UnsafeMutableRawPointer(closed).assumingMemoryBound(to: uv_tcp_t.self).deallocate()
                    connection.handleClosed(UnsafeMutableRawPointer(closed))
                }
            }
        } else {
            LoopDeferral.run(on: loop) { [self] in reportClosed() }
        }
    }

    private func handleClosed(_ closed: UnsafeMutableRawPointer) {
        guard let handle, UnsafeMutableRawPointer(handle) == closed else { return }
        self.handle = nil
        isConnected = false
        reportClosed()
    }

    private func reportClosed() {
        guard !reportedClosed else { return }
        reportedClosed = true
        let handler = onEvent
        onEvent = nil
        handler?(.closed)
    }

    /// Closes a failed attempt's handle; its close callback frees it and drops its reference.
    private static func closeHandle(_ handle: UnsafeMutablePointer<uv_tcp_t>) {
        uv_close(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) { closed in
            guard let closed else { return }
            if let data = closed.pointee.data { Unmanaged<TCPConnection>.fromOpaque(data).release() }
            UnsafeMutableRawPointer(closed).assumingMemoryBound(to: uv_tcp_t.self).deallocate()
        }
    }

    static func error(_ status: Int32, _ what: String) -> FerryError {
        let text = uv_strerror(status).map { String(cString: $0) } ?? "error \(status)"
        return FerryError(.io, "\(what): \(text)")
    }
}
