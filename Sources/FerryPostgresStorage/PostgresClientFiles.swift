import FerryCore
import FerrySyncStorage
import Logging
import PostgresNIO

/// Reads of `client_files` shared by the store and its write transactions.
enum PostgresClientFiles {
    static func clientFile(_ connection: PostgresConnection, _ ident: UInt64, logger: Logger) async throws -> ClientFileRecord? {
        try await clientFiles(connection, [ident], logger: logger)[ident]
    }

    /// Several client files in one query (a group commit's uploaders).
    static func clientFiles(_ connection: PostgresConnection, _ idents: [UInt64], logger: Logger) async throws -> [UInt64: ClientFileRecord] {
        guard !idents.isEmpty else { return [:] }
        let ids = idents.map { Int64(bitPattern: $0) }
        let rows = try await PostgresFailure.run("reading client files \(idents.prefix(3).map(String.init).joined(separator: ", "))\(idents.count > 3 ? "…" : "")") {
            try await connection.guardedQuery("""
                SELECT ident, salt, user_id, acked, sub_version, subs, last_seen, refusals FROM client_files WHERE ident = ANY(\(ids))
                """, logger: logger).collect()
        }
        var out: [UInt64: ClientFileRecord] = [:]
        for row in rows {
            let (ident, salt, userId, acked, subVersion, subs, lastSeen, refusals) = try PostgresObjectReads.decodeRow(
                row, (Int64, Int64, String, Int64, Int64, ByteBuffer?, Int64, ByteBuffer?).self, "client_files")
            var record = ClientFileRecord(
                ident: UInt64(bitPattern: ident), salt: UInt64(bitPattern: salt), userId: userId,
                acknowledgedClientVersion: UInt64(bitPattern: acked), subscriptionVersion: UInt64(bitPattern: subVersion),
                subscriptions: try subs.map { try SubscriptionCodec.decode($0.bytes) } ?? [], lastSeen: Int(lastSeen))
            if let refusals { record.refusalBytes = refusals.bytes }
            out[UInt64(bitPattern: ident)] = record
        }
        return out
    }
}
