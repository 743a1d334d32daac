/// The messages of Ferry's sync protocol (docs/protocol.md), one per WebSocket binary frame,
/// in the spirit of Realm's: a connection carries many sessions (one per synced database),
/// each bound with BIND and ended with UNBIND. The codec is `ProtocolCodec`.
public enum ProtocolMessage: Sendable, Equatable {
    /// Client: start a session for a database file. `clientFileIdent` 0 asks the server for
    /// an identity (answered by IDENT); `lastServerVersion` is what the file has integrated.
    /// `answeredThrough` (sent only to a server that offers `ProtocolFeatures.refusalReplay`):
    /// the local version through which the file has every answer, compensating writes included;
    /// the server sends again the refusals after it (`RefusalLedger`).
    case bind(session: UInt64, database: String, clientFileIdent: UInt64, clientFileSalt: UInt64, lastServerVersion: UInt64,
              answeredThrough: UInt64? = nil)
    /// Server: the identity of a new client file.
    case ident(session: UInt64, clientFileIdent: UInt64, clientFileSalt: UInt64)
    /// Client: a new version of the session's subscription set.
    case query(session: UInt64, version: UInt64, subscriptions: [Subscription])
    /// Client: local changesets, oldest first.
    case upload(session: UInt64, changesets: [UploadChangeset])
    /// Server: changesets for the client's view. `uploadAcknowledged` is the last client
    /// version the server has made durable; `subscriptionVersion` the subscription set the
    /// data reflects; `downloadableBytes` what is left to send (for progress estimates);
    /// `isLastInBatch` ends a bootstrap or a catch-up.
    case download(session: UInt64, serverVersion: UInt64, uploadAcknowledged: UInt64, subscriptionVersion: UInt64,
                  downloadableBytes: UInt64, isLastInBatch: Bool, changesets: [DownloadChangeset])
    /// Either side: a round trip marker (wait for download: the server answers once everything
    /// before the mark has been sent).
    case mark(session: UInt64, request: UInt64)
    case unbind(session: UInt64)
    /// Server: an error for one session (or the connection, session 0).
    case error(ProtocolError)
    case ping(timestamp: UInt64)
    case pong(timestamp: UInt64)
    /// Server: the write rules that apply to the session's user (SPEC F-PRECHECK), sent after
    /// BIND only to a client that asked for them in its handshake (`X-Ferry-Features:
    /// write-rules`), so an older client never receives a type it does not know.
    case writeRules(session: UInt64, rules: WriteRules)
}

/// What a client and a server offer beyond the protocol version (the WebSocket subprotocol),
/// named in the upgrade's `X-Ferry-Features` header: the client's request lists what it
/// understands, the server's answer what it accepts, so each side sends the other only what
/// it can read.
public enum ProtocolFeatures {
    public static let header = "X-Ferry-Features"
    /// Client: send me WRITE_RULES after BIND (SPEC F-PRECHECK).
    public static let writeRules = "write-rules"
    /// Server: BIND may carry `answeredThrough`, and refusals after it are sent again.
    public static let refusalReplay = "refusal-replay"

    /// The features a header's value names (bounded: at most 16, each trimmed).
    public static func parse(_ value: String) -> Set<String> {
        Set(value.prefix(200).split(separator: ",").prefix(16).map { part in
            String(part.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
        })
    }
}

public struct Subscription: Sendable, Equatable {
    public var name: String
    public var objectType: String
    public var query: String
    public init(name: String, objectType: String, query: String) {
        self.name = name
        self.objectType = objectType
        self.query = query
    }
}

public struct UploadChangeset: Sendable, Equatable {
    public var clientVersion: UInt64
    /// The server version the client had integrated when it made the change (for merging).
    public var lastIntegratedServerVersion: UInt64
    /// The `ChangesetCodec` bytes (which carry the change's timestamp).
    public var changeset: [UInt8]
    public init(clientVersion: UInt64, lastIntegratedServerVersion: UInt64, changeset: [UInt8]) {
        self.clientVersion = clientVersion
        self.lastIntegratedServerVersion = lastIntegratedServerVersion
        self.changeset = changeset
    }
}

public struct DownloadChangeset: Sendable, Equatable {
    public var serverVersion: UInt64
    /// The client file that made the change (0 for the server itself, e.g. a revert).
    public var originFileIdent: UInt64
    public var changeset: [UInt8]
    public init(serverVersion: UInt64, originFileIdent: UInt64, changeset: [UInt8]) {
        self.serverVersion = serverVersion
        self.originFileIdent = originFileIdent
        self.changeset = changeset
    }
}
