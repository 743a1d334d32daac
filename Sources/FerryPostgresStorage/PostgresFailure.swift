import FerryCore
import PostgresNIO

/// Turns what postgres-nio throws into a `FerryError` that says what failed. postgres-nio's
/// own `description` is deliberately generic ("PSQLError – Generic description…"), which would
/// leave an operator with nothing to act on; the server's message, SQLSTATE and the
/// connection-level cause are what they need. Only postgres-nio's and NIO's errors are
/// wrapped: ours (a corrupt blob) and a caller's (a write transaction's body) pass through
/// unchanged, so the caller can still tell them apart.
enum PostgresFailure {
    static func wrap(_ what: String, _ error: any Error) -> any Error {
        guard error is PSQLError || error is ChannelError || error is IOError else { return error }
        return FerryError(.io, "PostgreSQL: \(what) failed: \(describe(error))")
    }

    static func describe(_ error: any Error) -> String {
        guard let e = error as? PSQLError else { return String(describing: error) }
        if let info = e.serverInfo, let message = info[.message] {
            var text = message
            if let detail = info[.detail] { text += " (\(detail))" }
            if let state = info[.sqlState] { text += " [SQLSTATE \(state)]" }
            return text
        }
        var text = "\(e.code)"
        if let underlying = e.underlying { text += ": \(String(describing: underlying))" }
        return text
    }

    /// Runs `body`, wrapping what it throws (see `wrap`).
    @discardableResult
    static func run<T>(_ what: String, _ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch { throw wrap(what, error) }
    }
}
