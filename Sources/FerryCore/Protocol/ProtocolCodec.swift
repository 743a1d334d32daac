/// The binary form of `ProtocolMessage`: a type byte, then the fields (varints, length-prefixed
/// strings and bytes, `ValueCodec` values). Every decoder treats its input as hostile: a
/// malformed frame is a `FerryError(.corrupt)` for that connection, never a trap, and frames
/// and counts are bounded. The protocol version is negotiated in the WebSocket handshake.
public enum ProtocolCodec {
    public static let version: UInt32 = 1
    /// The largest integer a message may carry: 2^63-1. Every one (session ids, versions,
    /// idents, salts, request ids, sizes, timestamps) is stored or reported as a signed 64-bit
    /// number (SQLite's and PostgreSQL's integers, the sync log, metrics), so a larger one is
    /// refused here, where it is decoded, before any arithmetic or conversion can trap on it
    /// (a session id of 2^63 once killed the server in its telemetry).
    public static let maxInteger = UInt64(Int64.max)
    /// Larger frames are refused (a bootstrap is sent as several DOWNLOAD messages).
    public static let maxFrameBytes = 64 << 20

    enum Kind: UInt8 { case bind = 1, ident, query, upload, download, mark, unbind, error, ping, pong, writeRules }

    public static func encode(_ m: ProtocolMessage) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        switch m {
        case let .bind(session, database, ident, salt, last, answered):
            w.byte(Kind.bind.rawValue); w.varint(session); w.string(database); w.varint(ident); w.varint(salt); w.varint(last)
            // Only to a server that accepts it (`ProtocolFeatures.refusalReplay`): an older one
            // refuses trailing bytes.
            if let answered { w.varint(answered) }
        case let .ident(session, ident, salt):
            w.byte(Kind.ident.rawValue); w.varint(session); w.varint(ident); w.varint(salt)
        case let .query(session, version, subscriptions):
            w.byte(Kind.query.rawValue); w.varint(session); w.varint(version); w.varint(UInt64(subscriptions.count))
            for s in subscriptions { w.string(s.name); w.string(s.objectType); w.string(s.query) }
        case let .upload(session, changesets):
            w.byte(Kind.upload.rawValue); w.varint(session); w.varint(UInt64(changesets.count))
            for c in changesets { w.varint(c.clientVersion); w.varint(c.lastIntegratedServerVersion); w.lengthPrefixed(c.changeset) }
        case let .download(session, serverVersion, ack, subscriptionVersion, downloadable, last, changesets):
            w.byte(Kind.download.rawValue); w.varint(session); w.varint(serverVersion); w.varint(ack); w.varint(subscriptionVersion)
            w.varint(downloadable); w.byte(last ? 1 : 0); w.varint(UInt64(changesets.count))
            for c in changesets { w.varint(c.serverVersion); w.varint(c.originFileIdent); w.lengthPrefixed(c.changeset) }
        case let .mark(session, request):
            w.byte(Kind.mark.rawValue); w.varint(session); w.varint(request)
        case let .unbind(session):
            w.byte(Kind.unbind.rawValue); w.varint(session)
        case let .error(e):
            w.byte(Kind.error.rawValue); w.varint(e.session); w.signed(Int64(e.code)); w.string(e.message)
            w.byte(e.tryAgain ? 1 : 0); w.byte(e.action.rawValue); CompensatingWriteCodec.encode(e.compensatingWrites, into: &w)
        case let .ping(t):
            w.byte(Kind.ping.rawValue); w.varint(t)
        case let .pong(t):
            w.byte(Kind.pong.rawValue); w.varint(t)
        case let .writeRules(session, rules):
            w.byte(Kind.writeRules.rawValue); w.varint(session); WriteRulesCodec.encode(rules, into: &w)
        }
        return w.bytes
    }

    public static func decode(_ bytes: [UInt8]) throws -> ProtocolMessage {
        guard bytes.count <= maxFrameBytes else { throw FerryError(.corrupt, "frame of \(bytes.count) bytes is larger than \(maxFrameBytes)") }
        var r = ByteReader(bytes)
        let raw = try r.byte()
        guard let kind = Kind(rawValue: raw) else { throw r.corrupt("unknown message type \(raw)") }
        func flag() throws -> Bool {
            let b = try r.byte()
            guard b <= 1 else { throw r.corrupt("a flag must be 0 or 1") }
            return b == 1
        }
        /// A varint field, range-checked (`maxInteger`).
        func int(_ field: StaticString) throws -> UInt64 {
            let v = try r.varint()
            guard v <= maxInteger else { throw r.corrupt("\(field) \(v) is larger than 2^63-1, the largest the protocol allows") }
            return v
        }
        let m: ProtocolMessage
        switch kind {
        case .bind:
            let (session, database) = (try int("session"), try r.string())
            let (ident, salt, last) = (try int("client file ident"), try int("client file salt"), try int("server version"))
            let answered = r.isAtEnd ? nil : try int("answered client version")
            m = .bind(session: session, database: database, clientFileIdent: ident, clientFileSalt: salt, lastServerVersion: last, answeredThrough: answered)
        case .ident:
            m = .ident(session: try int("session"), clientFileIdent: try int("client file ident"), clientFileSalt: try int("client file salt"))
        case .query:
            let session = try int("session"), version = try int("subscription set version")
            var subs: [Subscription] = []
            for _ in 0..<(try r.count(minSize: 3)) {
                subs.append(Subscription(name: try r.string(), objectType: try r.string(), query: try r.string()))
            }
            m = .query(session: session, version: version, subscriptions: subs)
        case .upload:
            let session = try int("session")
            var list: [UploadChangeset] = []
            for _ in 0..<(try r.count(minSize: 3)) {
                list.append(UploadChangeset(clientVersion: try int("client version"), lastIntegratedServerVersion: try int("base server version"),
                                            changeset: Array(try r.lengthPrefixed())))
            }
            m = .upload(session: session, changesets: list)
        case .download:
            let session = try int("session"), serverVersion = try int("server version"), ack = try int("acknowledged client version")
            let subVersion = try int("subscription set version"), downloadable = try int("downloadable bytes"), last = try flag()
            var list: [DownloadChangeset] = []
            for _ in 0..<(try r.count(minSize: 3)) {
                list.append(DownloadChangeset(serverVersion: try int("server version"), originFileIdent: try int("origin file ident"), changeset: Array(try r.lengthPrefixed())))
            }
            m = .download(session: session, serverVersion: serverVersion, uploadAcknowledged: ack, subscriptionVersion: subVersion,
                          downloadableBytes: downloadable, isLastInBatch: last, changesets: list)
        case .mark:
            m = .mark(session: try int("session"), request: try int("mark request"))
        case .unbind:
            m = .unbind(session: try int("session"))
        case .error:
            let session = try int("session")
            let code = try r.signed()
            guard code >= Int64(Int32.min) && code <= Int64(Int32.max) else { throw r.corrupt("error code out of range") }
            let message = try r.string(), tryAgain = try flag()
            let rawAction = try r.byte()
            guard let action = ErrorAction(rawValue: rawAction) else { throw r.corrupt("unknown error action \(rawAction)") }
            let writes = try CompensatingWriteCodec.decode(from: &r)
            m = .error(ProtocolError(session: session, code: Int32(code), message: message, tryAgain: tryAgain, action: action, compensatingWrites: writes))
        case .ping:
            m = .ping(timestamp: try int("ping timestamp"))
        case .pong:
            m = .pong(timestamp: try int("pong timestamp"))
        case .writeRules:
            m = .writeRules(session: try int("session"), rules: try WriteRulesCodec.decode(from: &r))
        }
        guard r.isAtEnd else { throw r.corrupt("trailing bytes after a \(kind) message") }
        return m
    }
}
