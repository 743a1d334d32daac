import Logging
import PostgresNIO

/// The database schema, as numbered migrations recorded in `schema_migrations`. Each one runs
/// in one transaction that first takes a transaction-scoped advisory lock, so nodes starting
/// together take turns: the first applies it, the others then find it recorded and skip it.
/// Nothing needs a superuser (no extensions): a role that owns its database is enough.
/// Migrations are append-only: a released one is never edited, a change is a new one.
enum PostgresMigrations {
    /// The advisory lock key every Ferry node migrates under ("ferry" in ASCII, then 1).
    static let lockKey: Int64 = 0x6665_7272_7900_0001

    struct Migration {
        let version: Int32
        let statements: [String]
    }

    static let all: [Migration] = [
        Migration(version: 1, statements: [
            // The app's counters: server_version (the history head), sync_enabled, generation,
            // state_revision. The server_version row is also the app's write lock (FOR UPDATE).
            "CREATE TABLE sync_meta (key text PRIMARY KEY, value bigint NOT NULL)",
            """
            INSERT INTO sync_meta (key, value) VALUES ('server_version', 0), ('sync_enabled', 1), ('generation', 1),
                ('state_revision', 0) ON CONFLICT (key) DO NOTHING
            """,
            // pk: ValueCodec.encode(key); doc/erased_doc: StampedObject.encode(); lists:
            // ListOperationLog.encode(into:), NULL when empty. The same bytes as the SQLite store.
            """
            CREATE TABLE objects (tbl text NOT NULL, pk bytea NOT NULL, version bigint NOT NULL, doc bytea, lists bytea,
                erased_doc bytea, PRIMARY KEY (tbl, pk))
            """,
            // Catch-ups read (tbl, version > v) in (version, pk) pages.
            "CREATE INDEX objects_by_version ON objects (tbl, version, pk)",
            """
            CREATE TABLE client_files (ident bigserial PRIMARY KEY, salt bigint NOT NULL, user_id text NOT NULL,
                acked bigint NOT NULL DEFAULT 0, sub_version bigint NOT NULL DEFAULT 0, subs bytea, last_seen bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX client_files_by_user ON client_files (user_id, last_seen)",
            "CREATE TABLE secrets (name text PRIMARY KEY, value bytea NOT NULL)",
            // The user directory (see PostgresUserDirectory); data: the same blob as SQLite's.
            "CREATE TABLE users (id text PRIMARY KEY, data bytea NOT NULL, disabled boolean NOT NULL DEFAULT false)",
            """
            CREATE TABLE identities (provider text NOT NULL, provider_user_id text NOT NULL, user_id text NOT NULL,
                PRIMARY KEY (provider, provider_user_id))
            """,
            "CREATE INDEX identities_by_user ON identities (user_id)",
            "CREATE TABLE passwords (email text PRIMARY KEY, hash text NOT NULL)",
            "CREATE TABLE api_keys (hash text PRIMARY KEY, user_id text NOT NULL, name text NOT NULL)",
            "CREATE TABLE refresh_tokens (hash text PRIMARY KEY, user_id text NOT NULL, expires timestamptz NOT NULL)",
        ]),
        // The operations data (PostgresOperationsStorage): every user's sync log, and the sync
        // connections each node publishes for the cluster's device list. time/published/
        // connected_since: milliseconds since the epoch; details: a JSON object as text.
        Migration(version: 2, statements: [
            """
            CREATE TABLE sync_log (id bigserial PRIMARY KEY, time bigint NOT NULL, kind text NOT NULL, user_id text NOT NULL,
                node text NOT NULL, connection_id bigint NOT NULL, message text NOT NULL, details text NOT NULL)
            """,
            "CREATE INDEX sync_log_by_user ON sync_log (user_id, id)",
            "CREATE INDEX sync_log_by_kind ON sync_log (kind, id)",
            "CREATE INDEX sync_log_by_time ON sync_log (time)",
            """
            CREATE TABLE live_connections (node text NOT NULL, connection_id bigint NOT NULL, user_id text NOT NULL, client_file bigint,
                sdk text, connected_since bigint NOT NULL, bytes_up bigint NOT NULL, bytes_down bigint NOT NULL, sessions int NOT NULL,
                published bigint NOT NULL, PRIMARY KEY (node, connection_id))
            """,
        ]),
        // The server version each client file had at its last bind (`oldestBoundVersion`);
        // files from before count as at 0. When an admin last revoked a user's sessions
        // (seconds since the epoch; access tokens issued before are refused).
        Migration(version: 3, statements: [
            "ALTER TABLE client_files ADD COLUMN bound_version bigint NOT NULL DEFAULT 0",
            "CREATE INDEX client_files_by_bound_version ON client_files (bound_version)",
            "ALTER TABLE users ADD COLUMN sessions_valid_after bigint NOT NULL DEFAULT 0",
        ]),
        // Whether an admin paused sync (1) rather than terminated it: a resume keeps the sync
        // identity and the client files (SyncState.paused).
        Migration(version: 4, statements: [
            "INSERT INTO sync_meta (key, value) VALUES ('sync_paused', 0) ON CONFLICT (key) DO NOTHING",
        ]),
        // The client file whose write made each row's version: the Data API's change feed
        // says who made a change (null for rows written before).
        Migration(version: 5, statements: [
            "ALTER TABLE objects ADD COLUMN author bigint",
        ]),
        // Triggers' delivery state (`TriggerStorage`): cursor, failures, pause, lease.
        Migration(version: 6, statements: [
            """
            CREATE TABLE triggers (name text PRIMARY KEY, cursor bigint NOT NULL, failures int NOT NULL DEFAULT 0,
                paused boolean NOT NULL DEFAULT false, last_error text, holder text, lease_until bigint NOT NULL DEFAULT 0,
                delivered bigint NOT NULL DEFAULT 0)
            """,
        ]),
        // Backend SQL writes to the SQL tables, captured by the tables' triggers
        // (`PostgresSQLCapture`) in the writing transaction, until a node integrates them:
        // txid is the writer's transaction (txid_current()), op its TG_OP, old/new the row
        // before and after as a JSON array of column texts, at the time of the write.
        Migration(version: 7, statements: [
            """
            CREATE TABLE sql_inbox (id bigserial PRIMARY KEY, txid bigint NOT NULL, tbl text NOT NULL, op text NOT NULL,
                old jsonb, new jsonb, at timestamptz NOT NULL DEFAULT clock_timestamp())
            """,
            "CREATE INDEX sql_inbox_by_txid ON sql_inbox (txid, id)",
        ]),
        // The compensating writes sent to each client file, kept to send again when their
        // answer was lost (`RefusalLedger`); files from before have none kept.
        Migration(version: 8, statements: [
            "ALTER TABLE client_files ADD COLUMN refusals bytea",
        ]),
    ]

    /// Applies every migration the database has not recorded yet; returns how many it applied.
    @discardableResult
    static func run(_ client: PostgresClient, logger: Logger) async throws -> Int {
        var applied = 0
        for migration in all {
            let did = try await PostgresFailure.run("migration \(migration.version)") {
                try await client.withConnection { connection in
                    try await PostgresTransaction.run(connection, logger: logger) {
                        try await connection.guardedQuery("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
                        try await connection.guardedQuery("""
                            CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY,
                                applied_at timestamptz NOT NULL DEFAULT now())
                            """, logger: logger)
                        let rows = try await connection.guardedQuery("SELECT 1 FROM schema_migrations WHERE version = \(migration.version)",
                                                              logger: logger).collect()
                        guard rows.isEmpty else { return false }
                        for statement in migration.statements {
                            try await connection.guardedQuery(PostgresQuery(unsafeSQL: statement), logger: logger)
                        }
                        try await connection.guardedQuery("INSERT INTO schema_migrations (version) VALUES (\(migration.version))", logger: logger)
                        return true
                    }
                }
            }
            if did {
                applied += 1
                logger.info("PostgreSQL: applied migration \(migration.version)")
            }
        }
        return applied
    }
}
