import FerryCore
import FerrySyncStorage
import Foundation
import Logging
import PostgresNIO

/// A backend's own SQL writes to the SQL tables (issue 24; docs/backend.md, "Writing with
/// SQL"), captured where they are made: each table has a row trigger that appends the row
/// before and after (`sql_inbox`, migration 7) in the writer's own transaction, and a NOTIFY
/// on `ferry_sql_writes` wakes the nodes. A node integrates each captured transaction as one
/// changeset (FerryServer's `SQLWriteIntegrator`) and takes it out of the inbox in the same
/// transaction that makes the changeset durable (`consumeCapturedWrites`): integrated once,
/// whichever node gets there first.
///
/// Why a trigger and not logical decoding: it needs no superuser, no replication role and no
/// `wal_level = logical` (a managed PostgreSQL often allows neither); what it captures is
/// committed with the write or not at all, so nothing is lost across a crash of the backend,
/// the node or PostgreSQL; and any node reads the inbox with plain SQL, with no replication
/// slot left behind to hold back the WAL when a node is gone. It costs the writer one inbox
/// row per row written.
///
/// Ferry's own writes to the tables (an upload's merged state) set `ferry.origin` for their
/// transaction, and the triggers skip them: they never loop back.
extension PostgresSQLTables {
    /// The channel the triggers notify when they captured a write.
    public static let captureChannel = "ferry_sql_writes"
    /// Marks the transaction's writes to the tables as Ferry's own (transaction-local).
    static let markOrigin = "SELECT set_config('ferry.origin', 'ferry', true)"

    /// The capture function's name for a table: readable when it fits in PostgreSQL's 63
    /// bytes, else the class's hash.
    static func captureFunction(_ table: String) -> String {
        let plain = "ferry_capture_" + table
        if plain.utf8.count <= 63 { return plain }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325   // FNV-1a, 64 bits
        for b in table.utf8 { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
        return "ferry_capture_" + String(hash, radix: 16)
    }

    /// SQL making the text PostgreSQL gives back for one value `x` of `t`, in the shape
    /// `appendValue` writes (and `SQLWriteDecoding` reads): a timestamp as microseconds since
    /// the epoch (or `infinity`), binary as hex, anything else as its text.
    static func captureText(_ x: String, _ t: PropertyType) -> String {
        switch t {
        case .timestamp: return "(CASE WHEN isfinite(\(x)) THEN trunc(extract(epoch FROM \(x)) * 1000000)::text ELSE (\(x))::text END)"
        case .binary: return "encode(\(x), 'hex')"
        default: return "(\(x))::text"
        }
    }

    /// SQL for the JSON array of one row's columns (by property index) read from `record`
    /// (`OLD` or `NEW`); a list is an array of its elements' texts.
    static func captureRow(_ t: Table, record: String) -> String {
        let values = t.columns.map { c -> String in
            let x = "\(record).\(c.quotedName)"
            guard c.property.isList else { return captureText(x, c.property.valueType) }
            return "COALESCE((SELECT jsonb_agg(\(captureText("a.e", c.property.valueType)) ORDER BY a.n) FROM unnest(\(x)) WITH ORDINALITY AS a(e, n)), '[]'::jsonb)"
        }
        // jsonb_build_array takes at most 100 arguments.
        return stride(from: 0, to: values.count, by: 90).map { "jsonb_build_array(" + values[$0..<min($0 + 90, values.count)].joined(separator: ", ") + ")" }
            .joined(separator: " || ")
    }

    /// Installs (or replaces) each table's capture function and triggers, and a TRUNCATE
    /// guard (a TRUNCATE fires no row trigger, so it would be lost: it is refused).
    /// `inboxSchema`: where `sql_inbox` is (the server's own schema); `serverRole`: the role
    /// the server connects as. Only its sessions are skipped when they mark a write as
    /// Ferry's own: a backend connected as another role cannot hide its writes that way.
    func installCapture(_ connection: PostgresConnection, inboxSchema: String, serverRole: String, logger: Logger) async throws {
        let schema = Self.quote(schemaName)
        let ferrys = "current_setting('ferry.origin', true) = 'ferry' AND session_user = '\(serverRole.replacingOccurrences(of: "'", with: "''"))'"
        let inbox = Self.quote(inboxSchema) + ".sql_inbox"
        let guardFunction = "\(schema).ferry_refuse_truncate"
        try await connection.guardedQuery(PostgresQuery(unsafeSQL: """
            CREATE OR REPLACE FUNCTION \(guardFunction)() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $ferry$
            BEGIN
                IF \(ferrys) THEN RETURN NULL; END IF;
                RAISE EXCEPTION 'Ferry cannot sync a TRUNCATE of %.%: use DELETE', TG_TABLE_SCHEMA, TG_TABLE_NAME;
            END
            $ferry$
            """), logger: logger)
        for name in tables.keys.sorted() {
            let t = tables[name]!
            let function = schema + "." + Self.quote(Self.captureFunction(name))
            var body = """
                DECLARE o jsonb; n jsonb;
                BEGIN
                    IF \(ferrys) THEN RETURN NULL; END IF;
                    IF TG_OP <> 'INSERT' THEN o := \(Self.captureRow(t, record: "OLD")); END IF;
                    IF TG_OP <> 'DELETE' THEN n := \(Self.captureRow(t, record: "NEW")); END IF;
                    INSERT INTO \(inbox) (txid, tbl, op, old, new) VALUES (txid_current(), TG_TABLE_NAME, TG_OP, o, n);
                    PERFORM pg_notify('\(Self.captureChannel)', '');
                    RETURN NULL;
                END
                """
            // A dollar-quote tag the body (whose column names are the schema's) does not hold.
            var tag = "$ferry$", n = 0
            while body.contains(tag) {
                n += 1
                tag = "$ferry\(n)$"
            }
            body = tag + "\n" + body + "\n" + tag
            // The trigger's WHEN skips Ferry's own writes before any function is called or
            // any after-trigger event queued (the function checks again, for a trigger made
            // by hand without it).
            // SECURITY DEFINER: the backend's role writes the inbox through it without a grant
            // on the server's own tables; the search path is fixed so it cannot be redirected.
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: """
                CREATE OR REPLACE FUNCTION \(function)() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS \(body)
                """), logger: logger)
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: "DROP TRIGGER IF EXISTS ferry_capture ON \(t.qualified)"), logger: logger)
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: """
                CREATE TRIGGER ferry_capture AFTER INSERT OR UPDATE OR DELETE ON \(t.qualified) FOR EACH ROW
                WHEN (NOT coalesce(\(ferrys), false)) EXECUTE FUNCTION \(function)()
                """), logger: logger)
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: "DROP TRIGGER IF EXISTS ferry_no_truncate ON \(t.qualified)"), logger: logger)
            try await connection.guardedQuery(PostgresQuery(unsafeSQL: """
                CREATE TRIGGER ferry_no_truncate BEFORE TRUNCATE ON \(t.qualified) FOR EACH STATEMENT EXECUTE FUNCTION \(guardFunction)()
                """), logger: logger)
        }
    }
}

/// One backend transaction's captured writes, as the inbox holds them.
public struct CapturedTransaction: Sendable, Equatable {
    /// The writer's transaction id (`txid_current()`).
    public let id: Int64
    /// How many rows it wrote.
    public let rowCount: Int
    /// When its last row was written, in microseconds since the epoch (the database's clock).
    public let writtenAtMicroseconds: Int64
}

extension PostgresSyncStorage {
    /// The oldest captured transactions not yet integrated, at most `limit`: in the order of
    /// their last row, which is the order their conflicting writes committed in (a transaction
    /// that waited for another's row lock wrote that row after the other committed).
    public func capturedTransactions(limit: Int) async throws -> [CapturedTransaction] {
        try await withConnection("reading the captured SQL writes") { connection in
            let rows = try await PostgresFailure.run("reading sql_inbox") {
                try await connection.guardedQuery("""
                    SELECT txid, count(*), trunc(extract(epoch FROM max(at)) * 1000000)::bigint FROM sql_inbox
                    GROUP BY txid ORDER BY max(id) LIMIT \(limit)
                    """, logger: logger).collect()
            }
            return try rows.map { row in
                let (txid, count, at) = try PostgresObjectReads.decodeRow(row, (Int64, Int64, Int64).self, "sql_inbox")
                return CapturedTransaction(id: txid, rowCount: Int(clamping: count), writtenAtMicroseconds: at)
            }
        }
    }

    /// A page of one captured transaction's rows, in the order they were written.
    public func capturedRows(of transaction: Int64, after: Int64, limit: Int) async throws -> [CapturedRow] {
        try await withConnection("reading the captured SQL writes of transaction \(transaction)") { connection in
            let rows = try await PostgresFailure.run("reading sql_inbox") {
                try await connection.guardedQuery("""
                    SELECT id, tbl, op, old::text, new::text FROM sql_inbox WHERE txid = \(transaction) AND id > \(after) ORDER BY id LIMIT \(limit)
                    """, logger: logger).collect()
            }
            return try rows.map { row in
                let (id, table, op, old, new) = try PostgresObjectReads.decodeRow(row, (Int64, String, String, String?, String?).self, "sql_inbox")
                return CapturedRow(id: id, table: table, operation: op, old: old, new: new)
            }
        }
    }

    /// Wakes when a backend wrote the tables (a NOTIFY), and each time the listener
    /// (re)connects (what was captured meanwhile is then read). The listener reconnects with a
    /// capped backoff until the stream's consumer stops.
    public func capturedWriteSignals() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let (client, logger) = (self.client, self.logger)
        let task = Task {
            await PostgresListener.run(client, channel: PostgresSQLTables.captureChannel, what: "the capture of SQL writes", logger: logger,
                                       listening: { continuation.yield() }, notified: { _ in continuation.yield() })
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
