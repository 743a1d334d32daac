/// A short random id that ties what a client is told about a server-side failure to the
/// server's log line with the details. Storage errors name tables, hosts and SQL: they stay
/// in the log, and the client gets a generic message with this id (issue 22, point 8).
enum CorrelationId {
    static func make() -> String {
        let n = UInt64.random(in: 0...UInt64.max)
        let hex = String(n, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
