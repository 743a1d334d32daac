import FerryCore
import Foundation

/// Where the PostgreSQL database is: a `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` URL
/// (`postgresql://` too), parsed here once so that a typo in `--database` is reported at
/// startup with what is wrong, not as a connection failure later. User, password and database
/// are percent-decoded, as libpq does. The query parameters understood are `sslmode`
/// (`disable`, `prefer` (the default, as in libpq), `require`, `verify-full`) and, with
/// `verify-full`, `sslrootcert` (a PEM file of the CAs to trust); any other is an error
/// rather than silently ignored.
public struct PostgresLocation: CustomStringConvertible, Sendable, Equatable {
    /// How the connection uses TLS (libpq's `sslmode` values that postgres-nio can honour).
    public enum TLSMode: String, Sendable, Equatable {
        /// Plain TCP.
        case disable
        /// TLS if the server offers it, without verifying its certificate (libpq's default).
        case prefer
        /// TLS or no connection; the certificate is not verified (libpq's `require`).
        case require
        /// TLS with the certificate verified against the system's roots and the host name.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var tlsMode: TLSMode
    /// With `verify-full`: a PEM file of the certificate authorities to trust instead of the
    /// system's (libpq's `sslrootcert`), for a database with a private CA.
    public var rootCertificatePath: String?

    public init(host: String, port: Int = 5432, user: String, password: String?, database: String, tlsMode: TLSMode = .prefer,
                rootCertificatePath: String? = nil) {
        self.rootCertificatePath = rootCertificatePath
        self.host = host
        self.port = port
        self.user = user
        self.password = password
        self.database = database
        self.tlsMode = tlsMode
    }

    /// Parses a URL; throws `FerryError(.invalidArgument)` naming what is malformed (never
    /// quoting the password).
    public init(url: String) throws {
        func bad(_ why: String) -> FerryError { FerryError(.invalidArgument, "PostgreSQL URL: \(why) (expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE)") }
        func decoded(_ s: Substring, _ what: String) throws -> String {
            guard let d = String(s).removingPercentEncoding else { throw bad("the \(what) has an invalid percent-encoding") }
            return d
        }
        var rest: Substring
        if url.hasPrefix("postgres://") { rest = url.dropFirst("postgres://".count) }
        else if url.hasPrefix("postgresql://") { rest = url.dropFirst("postgresql://".count) }
        else { throw bad("the scheme must be postgres:// or postgresql://") }

        var query: Substring = ""
        if let q = rest.firstIndex(of: "?") { query = rest[rest.index(after: q)...]; rest = rest[..<q] }
        guard let slash = rest.firstIndex(of: "/") else { throw bad("no database name") }
        let authority = rest[..<slash]
        let database = try decoded(rest[rest.index(after: slash)...], "database name")
        guard !database.isEmpty, !database.contains("/") else { throw bad("no database name") }

        // The last '@' ends the user information: an unencoded '@' in a password still parses.
        guard let at = authority.lastIndex(of: "@") else { throw bad("no user name") }
        let userInfo = authority[..<at], hostPort = authority[authority.index(after: at)...]
        var password: String?
        let user: String
        if let colon = userInfo.firstIndex(of: ":") {
            user = try decoded(userInfo[..<colon], "user name")
            password = try decoded(userInfo[userInfo.index(after: colon)...], "password")
        } else {
            user = try decoded(userInfo, "user name")
        }
        guard !user.isEmpty else { throw bad("no user name") }

        var host: Substring, portText: Substring?
        if hostPort.hasPrefix("[") {  // [IPv6]:port
            guard let close = hostPort.firstIndex(of: "]") else { throw bad("an unclosed '[' in the host") }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("unexpected text after the host") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]; portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw bad("no host") }
        var port = 5432
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw bad("the port '\(portText)' is not a number from 1 to 65535") }
            port = p
        }

        var tlsMode = TLSMode.prefer
        var rootCertificatePath: String?
        for pair in query.split(separator: "&") where !pair.isEmpty {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0]), value = parts.count > 1 ? try decoded(parts[1], "parameter \(name)") : ""
            switch name {
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else { throw bad("sslmode '\(value)' is not one of disable, prefer, require, verify-full") }
                tlsMode = mode
            case "sslrootcert":
                guard !value.isEmpty else { throw bad("sslrootcert needs the path of a PEM file") }
                rootCertificatePath = value
            default:
                throw bad("unknown parameter '\(name)' (only sslmode and sslrootcert are understood)")
            }
        }
        if rootCertificatePath != nil, tlsMode != .verifyFull {
            throw bad("sslrootcert is used only with sslmode=verify-full (the certificate is not checked otherwise)")
        }
        self.init(host: String(host), port: port, user: user, password: password, database: database, tlsMode: tlsMode,
                  rootCertificatePath: rootCertificatePath)
    }

    /// `postgres://user@host:port/db`: what logs and errors show (never the password).
    public var description: String { "postgres://\(user)@\(hostAndPort)/\(database)" }

    /// `host:port`, with an IPv6 host in brackets.
    var hostAndPort: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
