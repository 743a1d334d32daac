import COpenSSL
import FerryCore
#if canImport(Glibc)
import Glibc
#endif

/// One TLS client session over two memory BIOs. `Transport` hands it the ciphertext it reads and
/// sends the ciphertext it takes back, so OpenSSL never touches the socket and the libuv loop
/// stays in charge of all I/O.
final class TLSSession {
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    /// Ciphertext from the peer, written by us and read by OpenSSL.
    private let incoming: OpaquePointer
    /// Ciphertext for the peer, written by OpenSSL and read by us.
    private let outgoing: OpaquePointer
    private let host: String
    private(set) var isEstablished = false

    init(host: String, options: TLSOptions) throws(FerryError) {
        self.host = host
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Self.failure("cannot create a TLS context") }
        // SSL_CTX_set_min_proto_version is a macro over SSL_CTX_ctrl.
        _ = SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_2_VERSION), nil)
        if !options.insecureSkipVerify {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            _ = SSL_CTX_set_default_verify_paths(context) // a system without a CA store can still use caFile
            if let caFile = options.caFile, SSL_CTX_load_verify_locations(context, caFile, nil) != 1 {
                SSL_CTX_free(context)
                throw Self.failure("cannot load the CA file \(caFile)")
            }
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw Self.failure("cannot create a TLS session")
        }
        guard let incoming = BIO_new(BIO_s_mem()), let outgoing = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            SSL_CTX_free(context)
            throw Self.failure("cannot create TLS buffers")
        }
        SSL_set_bio(ssl, incoming, outgoing) // the session owns the BIOs from here
        self.context = context
        self.ssl = ssl
        self.incoming = incoming
        self.outgoing = outgoing
        SSL_set_connect_state(ssl)

        if Self.isIPAddress(host) {
            // No SNI for an address (RFC 6066 §3); verify it against the certificate's IP SANs.
            if !options.insecureSkipVerify, X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1 {
                throw Self.failure("cannot set the address to verify")
            }
        } else {
            // SSL_set_tlsext_host_name is a macro over SSL_ctrl; OpenSSL copies the name.
            let sni = host.withCString {
                SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0))
            }
            guard sni == 1 else { throw Self.failure("cannot set the server name") }
            if !options.insecureSkipVerify, SSL_set1_host(ssl, host) != 1 { throw Self.failure("cannot set the host name to verify") }
        }
    }

    deinit {
        SSL_free(ssl) // frees both BIOs
        SSL_CTX_free(context)
    }

    /// Starts or continues the handshake; true once it is complete.
    @discardableResult
    func handshake() throws(FerryError) -> Bool {
        guard !isEstablished else { return true }
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 {
            isEstablished = true
            return true
        }
        let code = SSL_get_error(ssl, rc)
        if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { return false }
        let verify = SSL_get_verify_result(ssl)
        if verify != Int(X509_V_OK) {
            let reason = X509_verify_cert_error_string(verify).map { String(cString: $0) } ?? "error \(verify)"
            throw FerryError(.io, "TLS handshake with \(host) failed: certificate verification failed: \(reason)")
        }
        throw Self.failure("TLS handshake with \(host) failed")
    }

    /// Feeds ciphertext from the peer; returns the plaintext it completes and whether the peer
    /// sent close_notify. Drives the handshake until it is established.
    func receive(_ ciphertext: [UInt8]) throws(FerryError) -> (plaintext: [UInt8], peerClosed: Bool) {
        if !ciphertext.isEmpty {
            let written = ciphertext.withUnsafeBytes { BIO_write(incoming, $0.baseAddress, Int32(clamping: $0.count)) }
            guard written == Int32(clamping: ciphertext.count) else { throw Self.failure("cannot buffer TLS input") }
        }
        guard try handshake() else { return ([], false) }
        var plaintext: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            ERR_clear_error()
            let count = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if count > 0 {
                plaintext += chunk[0..<Int(count)]
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return (plaintext, false)
            case SSL_ERROR_ZERO_RETURN: return (plaintext, true)
            default: throw Self.failure("TLS read from \(host) failed")
            }
        }
    }

    /// Encrypts plaintext; the ciphertext waits in `takeOutgoing()`.
    func send(_ plaintext: [UInt8]) throws(FerryError) {
        var offset = 0
        while offset < plaintext.count {
            ERR_clear_error()
            let count = plaintext.withUnsafeBytes {
                SSL_write(ssl, $0.baseAddress! + offset, Int32(clamping: $0.count - offset))
            }
            guard count > 0 else { throw Self.failure("TLS write to \(host) failed") }
            offset += Int(count)
        }
    }

    /// Sends close_notify (into `takeOutgoing()`); the peer is not waited for.
    func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    /// The ciphertext waiting to be sent.
    func takeOutgoing() -> [UInt8] {
        let pending = BIO_ctrl_pending(outgoing)
        guard pending > 0 else { return [] }
        var out = [UInt8](repeating: 0, count: pending)
        let count = out.withUnsafeMutableBytes { BIO_read(outgoing, $0.baseAddress, Int32(clamping: $0.count)) }
        return count > 0 ? Array(out[0..<Int(count)]) : []
    }

    private static func isIPAddress(_ host: String) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 16)
        return inet_pton(AF_INET, host, &buffer) == 1 || inet_pton(AF_INET6, host, &buffer) == 1
    }

    /// A FerryError with OpenSSL's queued reasons appended.
    private static func failure(_ what: String) -> FerryError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &text, text.count)
            reasons.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return FerryError(.io, reasons.isEmpty ? what : "\(what): \(reasons.joined(separator: "; "))")
    }
}
