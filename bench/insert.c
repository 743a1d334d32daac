/*
 * insert.c — inserts N Item objects (default 1,000,000) in write transactions of B (default
 * 10,000) through Ferry's C API (data and history), then the same rows through raw SQLite
 * prepared statements into a table with Ferry's own DDL and Ferry's pragmas, each on a fresh
 * file, and prints rows/s for both and the ratio Ferry/raw (target >= 0.8).
 *
 *   Item { _id ObjectId (primary key), ownerId string (one of 100 user ids),
 *          itemName string ("item-<n>"), complexity int (n % 10) }
 *
 * The ObjectIds are generated (with ferry_object_id_generate) before either run, and both
 * runs insert the very same rows; building the values and formatting itemName are inside
 * both timings. Ferry's DDL is read back from Ferry's file with
 *   SELECT sql FROM sqlite_master WHERE type='table' AND name NOT LIKE '\_\_%' ESCAPE '\'
 * (plus any index Ferry created on that table) and printed.
 *
 * Each round also inserts the same rows through the C API into a file encrypted with a 64-byte
 * key (ferry_db_options_t.encryption_key: every page of the file and its WAL sealed with
 * AES-256-GCM, docs/encryption.md) and prints rows/s and the ratio encrypted/unencrypted.
 *
 * Usage: insert [--rows N] [--batch B] [--dir DIR] [--rounds R] [--keep]
 */
#define _GNU_SOURCE 1
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

static void die_ferry(int rc, const char *what) {
  fprintf(stderr, "insert: %s failed: %s (%d): %s\n", what, ferry_strerror(rc), rc,
          ferry_error_last()->message);
  exit(1);
}
#define FERRY(call)                               \
  do {                                            \
    int rc_ = (call);                             \
    if (rc_ != FERRY_OK) die_ferry(rc_, #call);   \
  } while (0)

static void die_sqlite(sqlite3 *db, int rc, const char *what) {
  fprintf(stderr, "insert: %s failed: %d %s\n", what, rc, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  exit(1);
}
#define SQL(db, call)                                         \
  do {                                                        \
    int rc_ = (call);                                         \
    if (rc_ != SQLITE_OK && rc_ != SQLITE_DONE && rc_ != SQLITE_ROW) die_sqlite(db, rc_, #call); \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static void remove_db(const char *path) {
  char p[1100];
  unlink(path);
  snprintf(p, sizeof p, "%s-wal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-shm", path);
  unlink(p);
  snprintf(p, sizeof p, "%s-journal", path);
  unlink(p);
  snprintf(p, sizeof p, "%s.lock", path);
  unlink(p);
}

/* ---- the rows ------------------------------------------------------------------------------ */

static size_t rows = 1000000, batch = 10000;
static uint8_t (*ids)[12];
static char owners[100][16];

static void make_rows(void) {
  ids = malloc(rows * 12);
  if (!ids) {
    perror("malloc");
    exit(1);
  }
  for (size_t i = 0; i < rows; i++) {
    ferry_value_t v;
    FERRY(ferry_object_id_generate(&v));
    memcpy(ids[i], v.u.object_id, 12);
  }
  for (int u = 0; u < 100; u++) snprintf(owners[u], sizeof owners[u], "user-%02d", u);
}

/* ---- Ferry ------------------------------------------------------------------------------- */

/* key: NULL, or a 64-byte encryption key (the encrypted run). with_receipts: each commit takes
 * its write receipt (ferry_db_commit_with_receipt) and the host reads the receipt's state once
 * (ferry_db_receipt_state), as a host following its writes would; without, a plain
 * ferry_db_commit. */
static double run_ferry(const char *path, uint64_t *history, const uint8_t *key, int with_receipts) {
  remove_db(path);
  static const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_NORMAL, NULL},
  };
  const ferry_class_info_t cls = {"Item", props, 4, FERRY_CLASS_NORMAL};
  ferry_schema_t *schema = NULL;
  FERRY(ferry_schema_new(&schema, &cls, 1));
  ferry_db_options_t o;
  FERRY(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
  o.path = path;
  o.schema = schema;
  o.encryption_key = key;
  ferry_db_t *db = NULL;
  FERRY(ferry_db_open(&db, &o));
  ferry_schema_free(schema);
  ferry_class_key_t item;
  ferry_property_key_t k_id, k_owner, k_name, k_cx;
  FERRY(ferry_db_find_class(&item, db, "Item"));
  FERRY(ferry_db_find_property(&k_id, db, item, "_id"));
  FERRY(ferry_db_find_property(&k_owner, db, item, "ownerId"));
  FERRY(ferry_db_find_property(&k_name, db, item, "itemName"));
  FERRY(ferry_db_find_property(&k_cx, db, item, "complexity"));

  char name[32];
  ferry_property_value_t v[4];
  memset(v, 0, sizeof v);
  v[0].property = k_id;
  v[0].value.type = FERRY_TYPE_OBJECT_ID;
  v[1].property = k_owner;
  v[1].value.type = FERRY_TYPE_STRING;
  v[2].property = k_name;
  v[2].value.type = FERRY_TYPE_STRING;
  v[2].value.u.string.data = name;
  v[3].property = k_cx;
  v[3].value.type = FERRY_TYPE_INT;

  double t0 = now();
  for (size_t start = 0; start < rows; start += batch) {
    FERRY(ferry_db_begin_write(db));
    size_t end = start + batch < rows ? start + batch : rows;
    for (size_t n = start; n < end; n++) {
      memcpy(v[0].value.u.object_id, ids[n], 12);
      v[1].value.u.string.data = owners[n % 100];
      v[1].value.u.string.size = 7;
      v[2].value.u.string.size = (size_t)snprintf(name, sizeof name, "item-%zu", n);
      v[3].value.u.i = (int64_t)(n % 10);
      FERRY(ferry_object_create(db, item, v, 4));
    }
    if (with_receipts) {
      uint64_t receipt = 0;
      int32_t state = -1;
      FERRY(ferry_db_commit_with_receipt(&receipt, db));
      FERRY(ferry_db_receipt_state(&state, db, receipt));
      if (state != FERRY_RECEIPT_LOCAL) {
        fprintf(stderr, "insert: receipt %" PRIu64 " of a local database reads %d, not LOCAL\n", receipt, state);
        exit(1);
      }
    } else {
      FERRY(ferry_db_commit(db));
    }
  }
  double elapsed = now() - t0;
  FERRY(ferry_db_history_count(history, db));
  FERRY(ferry_db_close(db));
  ferry_db_free(db);
  return elapsed;
}

/* ---- Ferry's DDL, read back from its file --------------------------------------------------- */

struct ddl {
  char table[256];      /* the table's name */
  char create[4096];    /* CREATE TABLE ... */
  char indexes[4][1024]; /* CREATE INDEX ... on that table */
  int index_count;
  char insert[2048];    /* INSERT with the columns _id, ownerId, itemName, complexity */
};

static void read_ddl(const char *ferry_path, struct ddl *d) {
  sqlite3 *db = NULL;
  SQL(db, sqlite3_open_v2(ferry_path, &db, SQLITE_OPEN_READONLY, NULL));
  sqlite3_stmt *s = NULL;
  SQL(db, sqlite3_prepare_v2(db,
                             "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT "
                             "LIKE '\\_\\_%' ESCAPE '\\' AND name LIKE '%Item%'",
                             -1, &s, NULL));
  int found = 0;
  while (sqlite3_step(s) == SQLITE_ROW) {
    snprintf(d->table, sizeof d->table, "%s", (const char *)sqlite3_column_text(s, 0));
    snprintf(d->create, sizeof d->create, "%s", (const char *)sqlite3_column_text(s, 1));
    found++;
  }
  sqlite3_finalize(s);
  if (found != 1) {
    fprintf(stderr, "insert: expected one Item table in %s, found %d\n", ferry_path, found);
    exit(1);
  }
  SQL(db, sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_master WHERE type='index' AND tbl_name=? AND sql IS NOT NULL",
                             -1, &s, NULL));
  sqlite3_bind_text(s, 1, d->table, -1, SQLITE_TRANSIENT);
  d->index_count = 0;
  while (sqlite3_step(s) == SQLITE_ROW && d->index_count < 4)
    snprintf(d->indexes[d->index_count++], sizeof d->indexes[0], "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  /* the columns are named after the properties: check, then insert by name */
  const char *needed[] = {"_id", "ownerId", "itemName", "complexity"};
  char pragma[512];
  snprintf(pragma, sizeof pragma, "PRAGMA table_info(\"%s\")", d->table);
  SQL(db, sqlite3_prepare_v2(db, pragma, -1, &s, NULL));
  int have = 0;
  while (sqlite3_step(s) == SQLITE_ROW)
    for (int i = 0; i < 4; i++)
      if (strcmp((const char *)sqlite3_column_text(s, 1), needed[i]) == 0) have |= 1 << i;
  sqlite3_finalize(s);
  if (have != 15) {
    fprintf(stderr, "insert: Ferry's table %s does not have columns named after the properties\n", d->table);
    exit(1);
  }
  snprintf(d->insert, sizeof d->insert,
           "INSERT INTO \"%s\" (\"_id\", \"ownerId\", \"itemName\", \"complexity\") VALUES (?, ?, ?, ?)",
           d->table);
  sqlite3_close(db);
}

/* ---- raw SQLite ---------------------------------------------------------------------------- */

static double run_raw(const char *path, const struct ddl *d) {
  remove_db(path);
  sqlite3 *db = NULL;
  SQL(db, sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL));
  SQL(db, sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", NULL, NULL, NULL));
  SQL(db, sqlite3_exec(db, d->create, NULL, NULL, NULL));
  for (int i = 0; i < d->index_count; i++) SQL(db, sqlite3_exec(db, d->indexes[i], NULL, NULL, NULL));
  sqlite3_stmt *ins = NULL, *begin = NULL, *commit = NULL;
  SQL(db, sqlite3_prepare_v3(db, d->insert, -1, SQLITE_PREPARE_PERSISTENT, &ins, NULL));
  SQL(db, sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL));
  SQL(db, sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL));
  char name[32];
  double t0 = now();
  for (size_t start = 0; start < rows; start += batch) {
    SQL(db, sqlite3_step(begin));
    sqlite3_reset(begin);
    size_t end = start + batch < rows ? start + batch : rows;
    for (size_t n = start; n < end; n++) {
      int len = snprintf(name, sizeof name, "item-%zu", n);
      sqlite3_bind_blob(ins, 1, ids[n], 12, SQLITE_STATIC);
      sqlite3_bind_text(ins, 2, owners[n % 100], 7, SQLITE_STATIC);
      sqlite3_bind_text(ins, 3, name, len, SQLITE_STATIC);
      sqlite3_bind_int64(ins, 4, (int64_t)(n % 10));
      int rc = sqlite3_step(ins);
      if (rc != SQLITE_DONE) die_sqlite(db, rc, "insert");
      sqlite3_reset(ins);
    }
    SQL(db, sqlite3_step(commit));
    sqlite3_reset(commit);
  }
  double elapsed = now() - t0;
  sqlite3_finalize(ins);
  sqlite3_finalize(begin);
  sqlite3_finalize(commit);
  SQL(db, sqlite3_close(db));
  return elapsed;
}

static size_t count_rows(const char *path, const char *table) {
  sqlite3 *db = NULL;
  SQL(db, sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL));
  char q[512];
  snprintf(q, sizeof q, "SELECT COUNT(*) FROM \"%s\"", table);
  sqlite3_stmt *s = NULL;
  SQL(db, sqlite3_prepare_v2(db, q, -1, &s, NULL));
  size_t n = sqlite3_step(s) == SQLITE_ROW ? (size_t)sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return n;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  int rounds = 1, keep = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--keep")) keep = 1;
    else {
      fprintf(stderr, "usage: %s [--rows N] [--batch B] [--dir DIR] [--rounds R] [--keep]\n", argv[0]);
      return 2;
    }
  }
  if (rows == 0 || batch == 0 || rounds < 1) return 2;
  char tmpdir[512] = "";
  if (!dir) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/ferry-bench-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
      perror("mkdtemp");
      return 1;
    }
    dir = tmpdir;
  }
  char ferry_path[1024], raw_path[1024], encrypted_path[1024];
  snprintf(ferry_path, sizeof ferry_path, "%s/insert-ferry.ferry", dir);
  snprintf(encrypted_path, sizeof encrypted_path, "%s/insert-encrypted.ferry", dir);
  uint8_t key[FERRY_ENCRYPTION_KEY_SIZE];
  for (int i = 0; i < FERRY_ENCRYPTION_KEY_SIZE; i++) key[i] = (uint8_t)(i * 37 + 11);
  snprintf(raw_path, sizeof raw_path, "%s/insert-raw.sqlite", dir);

  printf("insert: %zu Item objects in transactions of %zu, Ferry %s, SQLite %s, files in %s\n", rows,
         batch, ferry_version(), sqlite3_libversion(), dir);
  make_rows();

  double sum_f = 0, sum_r = 0, sum_e = 0, sum_rc = 0;
  for (int round = 1; round <= rounds; round++) {
    uint64_t history = 0;
    double tf = run_ferry(ferry_path, &history, NULL, 0);
    struct ddl d;
    read_ddl(ferry_path, &d);
    if (round == 1) {
      printf("  Ferry's DDL, used for the raw table:\n    %s;\n", d.create);
      for (int i = 0; i < d.index_count; i++) printf("    %s;\n", d.indexes[i]);
      printf("  pragmas for both: PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;\n");
    }
    size_t ferry_rows = count_rows(ferry_path, d.table);
    long long ferry_bytes = file_size(ferry_path);
    double tr = run_raw(raw_path, &d);
    size_t raw_rows = count_rows(raw_path, d.table);
    long long raw_bytes = file_size(raw_path);
    if (ferry_rows != rows || raw_rows != rows) {
      fprintf(stderr, "insert: row counts differ: Ferry %zu, raw %zu, expected %zu\n", ferry_rows, raw_rows, rows);
      return 1;
    }
    uint64_t encrypted_history = 0;
    double te = run_ferry(encrypted_path, &encrypted_history, key, 0);
    long long encrypted_bytes = file_size(encrypted_path);
    uint64_t receipt_history = 0;
    double trc = run_ferry(ferry_path, &receipt_history, NULL, 1);
    double rf = (double)rows / tf, rr = (double)rows / tr, ratio = rf / rr, re = (double)rows / te, rrc = (double)rows / trc;
    sum_f += tf;
    sum_r += tr;
    sum_e += te;
    sum_rc += trc;
    printf("  round %d:\n", round);
    printf("    Ferry C API (with history): %9.0f rows/s  (%.2f s, %" PRIu64 " changesets, file %.1f MB)\n",
           rf, tf, history, (double)ferry_bytes / 1e6);
    printf("    raw SQLite statements:      %9.0f rows/s  (%.2f s, file %.1f MB)\n", rr, tr,
           (double)raw_bytes / 1e6);
    printf("    ratio Ferry/raw:            %9.2f  (target >= 0.80)\n", ratio);
    printf("    Ferry C API, encrypted:     %9.0f rows/s  (%.2f s, file %.1f MB)\n", re, te,
           (double)encrypted_bytes / 1e6);
    printf("    ratio encrypted/plain:      %9.2f\n", tf / te);
    printf("    Ferry with write receipts:  %9.0f rows/s  (%.2f s; commit_with_receipt + receipt_state per commit)\n",
           rrc, trc);
    printf("    ratio receipts/plain:       %9.2f\n", rrc / rf);
  }
  /* over all rounds: total rows / total time for each, and their ratio */
  double rf = (double)rows * rounds / sum_f, rr = (double)rows * rounds / sum_r, ratio = sum_r / sum_f;
  double re = (double)rows * rounds / sum_e, encryption_ratio = sum_f / sum_e;
  double rrc = (double)rows * rounds / sum_rc, receipts_ratio = sum_f / sum_rc;
  if (rounds > 1)
    printf("  over %d rounds: Ferry %.0f rows/s, raw %.0f rows/s, ratio %.2f; encrypted %.0f rows/s, "
           "ratio encrypted/plain %.2f; with receipts %.0f rows/s, receipts/plain %.2f\n",
           rounds, rf, rr, ratio, re, encryption_ratio, rrc, receipts_ratio);
  printf("RESULT insert_ferry_rows_per_s=%.0f insert_raw_rows_per_s=%.0f ratio=%.2f %s "
         "insert_encrypted_rows_per_s=%.0f encrypted_to_plain=%.2f insert_receipts_rows_per_s=%.0f receipts_ratio=%.2f\n",
         rf, rr, ratio, ratio >= 0.8 ? "(target met)" : "(BELOW the 0.8 target)", re, encryption_ratio, rrc, receipts_ratio);
  if (!keep) {
    remove_db(ferry_path);
    remove_db(raw_path);
    remove_db(encrypted_path);
    if (tmpdir[0]) rmdir(tmpdir);
  }
  free(ids);
  return 0;
}
