import FerryCore
import FerrySyncStorage
import Logging
import PostgresNIO

/// Reads of `client_files` shared by the store and its write transactions.
enum PostgresClientFiles {
    static func clientFile(_ connection: PostgresConnection, _ ident: UInt64, logger: Logger) async throws -> ClientFileRecord? {
        let rows = try await PostgresFailure.run("reading client file \(ident)") {
            try await connection.guardedQuery("""
                SELECT salt, user_id, acked, sub_version, subs, last_seen FROM client_files WHERE ident = \(Int64(bitPattern: ident))
                """, logger: logger).collect()
        }
        guard let row = rows.first else { return nil }
        let (salt, userId, acked, subVersion, subs, lastSeen) = try PostgresObjectReads.decodeRow(
            row, (Int64, String, Int64, Int64, ByteBuffer?, Int64).self, "client_files")
        return ClientFileRecord(ident: ident, salt: UInt64(bitPattern: salt), userId: userId,
                                acknowledgedClientVersion: UInt64(bitPattern: acked), subscriptionVersion: UInt64(bitPattern: subVersion),
                                subscriptions: try subs.map { try SubscriptionCodec.decode($0.bytes) } ?? [], lastSeen: Int(lastSeen))
    }
}
