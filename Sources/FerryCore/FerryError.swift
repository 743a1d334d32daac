/// The stable error codes of Ferry. The raw values are the C API's `FERRY_ERR_*` codes and are
/// never renumbered; the server will use the same codes in its protocol errors.
public enum ErrorCode: Int32, Sendable, CaseIterable {
    case invalidArgument = -1
    case invalidHandle = -2
    case noMemory = -3
    case io = -4
    case closed = -5
    case notInTransaction = -6
    case alreadyInTransaction = -7
    case noSuchClass = -8
    case noSuchProperty = -9
    case wrongType = -10
    case notFound = -11
    case duplicatePrimaryKey = -12
    case query = -13
    case invalidSchema = -14
    case schemaMismatch = -15
    case multipleSyncAgents = -16
    case outOfRange = -17
    case corrupt = -18
    case busy = -19
    /// The server could not be reached, or the connection broke.
    case network = -20
    /// The server refused the credentials or the token.
    case auth = -21
    /// The sync server reported an error (see the sync error handler for details).
    case sync = -22
    case timeout = -23
    /// A write transaction failed the pre-flight check in strict mode (SPEC F-PRECHECK): the
    /// server would reject it; nothing was written.
    case writeRejected = -24
    /// An encrypted file could not be decrypted: a wrong key, a missing key, an unencrypted
    /// file opened with a key, or a page that fails authentication (changed or damaged).
    case decrypt = -25
    case `internal` = -100

    /// Short static text for the code, as `ferry_strerror` returns it.
    public var summary: String {
        switch self {
        case .invalidArgument: return "invalid argument"
        case .invalidHandle: return "invalid handle"
        case .noMemory: return "out of memory"
        case .io: return "input/output error"
        case .closed: return "database is closed"
        case .notInTransaction: return "not in a write transaction"
        case .alreadyInTransaction: return "already in a write transaction"
        case .noSuchClass: return "no such class"
        case .noSuchProperty: return "no such property"
        case .wrongType: return "wrong type"
        case .notFound: return "object not found"
        case .duplicatePrimaryKey: return "duplicate primary key"
        case .query: return "invalid query"
        case .invalidSchema: return "invalid schema"
        case .schemaMismatch: return "schema mismatch"
        case .multipleSyncAgents: return "another process is the sync agent of this file"
        case .outOfRange: return "index out of range"
        case .corrupt: return "corrupt or foreign file"
        case .busy: return "database is busy"
        case .network: return "network error"
        case .auth: return "authentication failed"
        case .sync: return "sync error"
        case .timeout: return "timed out"
        case .writeRejected: return "write rejected by the pre-flight check"
        case .decrypt: return "cannot decrypt: wrong key or damaged file"
        case .internal: return "internal error"
        }
    }
}

/// Every failure inside Ferry is a `FerryError`: a stable code and a message for a person.
/// The C layer turns it into a return code plus `ferry_error_last()`.
public struct FerryError: Error, Sendable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.summary): \(message)" }
}
