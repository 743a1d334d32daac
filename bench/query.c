/*
 * query.c — the query `complexity <= 4` over N Item objects (default 1,000,000), with
 * `complexity` indexed and without an index: two schemas, two files, the same rows. Each
 * measurement is ferry_db_query + ferry_results_count (the results hold every matching
 * object's values), repeated R times (default 5); the median and the minimum are printed,
 * with the number of rows matched. A more selective query (`complexity == 3 AND ownerId ==
 * "user-13"`) is timed the same way for comparison.
 *
 * Usage: query [--rows N] [--repeat R] [--dir DIR] [--keep]
 */
#define _GNU_SOURCE 1
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

static void die(int rc, const char *what) {
  fprintf(stderr, "query: %s failed: %s (%d): %s\n", what, ferry_strerror(rc), rc,
          ferry_error_last()->message);
  exit(1);
}
#define FERRY(call)                          \
  do {                                       \
    int rc_ = (call);                        \
    if (rc_ != FERRY_OK) die(rc_, #call);    \
  } while (0)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void remove_db(const char *path) {
  char p[1100];
  unlink(path);
  const char *suffixes[] = {"-wal", "-shm", "-journal", ".lock"};
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffixes[i]);
    unlink(p);
  }
}

static size_t rows = 1000000;
static int repeat = 5;

/* Creates a file with N items; complexity indexed or not. Returns the open database. */
static ferry_db_t *build(const char *path, bool indexed, double *insert_s) {
  remove_db(path);
  const ferry_property_info_t props[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"itemName", FERRY_TYPE_STRING, FERRY_PROPERTY_NORMAL, NULL},
      {"complexity", FERRY_TYPE_INT, indexed ? FERRY_PROPERTY_INDEXED : FERRY_PROPERTY_NORMAL, NULL},
  };
  const ferry_class_info_t cls = {"Item", props, 4, FERRY_CLASS_NORMAL};
  ferry_schema_t *schema = NULL;
  FERRY(ferry_schema_new(&schema, &cls, 1));
  ferry_db_options_t o;
  FERRY(ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION));
  o.path = path;
  o.schema = schema;
  ferry_db_t *db = NULL;
  FERRY(ferry_db_open(&db, &o));
  ferry_schema_free(schema);
  ferry_class_key_t item;
  ferry_property_key_t k[4];
  const char *names[] = {"_id", "ownerId", "itemName", "complexity"};
  FERRY(ferry_db_find_class(&item, db, "Item"));
  for (int i = 0; i < 4; i++) FERRY(ferry_db_find_property(&k[i], db, item, names[i]));
  char owner[16], name[32];
  ferry_property_value_t v[4];
  memset(v, 0, sizeof v);
  for (int i = 0; i < 4; i++) v[i].property = k[i];
  v[1].value.type = v[2].value.type = FERRY_TYPE_STRING;
  v[1].value.u.string.data = owner;
  v[2].value.u.string.data = name;
  v[3].value.type = FERRY_TYPE_INT;
  double t0 = now();
  for (size_t start = 0; start < rows; start += 10000) {
    FERRY(ferry_db_begin_write(db));
    for (size_t n = start; n < rows && n < start + 10000; n++) {
      FERRY(ferry_object_id_generate(&v[0].value));
      v[1].value.u.string.size = (size_t)snprintf(owner, sizeof owner, "user-%02zu", n % 100);
      v[2].value.u.string.size = (size_t)snprintf(name, sizeof name, "item-%zu", n);
      v[3].value.u.i = (int64_t)(n % 10);
      FERRY(ferry_object_create(db, item, v, 4));
    }
    FERRY(ferry_db_commit(db));
  }
  *insert_s = now() - t0;
  return db;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs the query `repeat` times; prints and returns the median in ms. */
static double time_query(ferry_db_t *db, const char *label, const char *query, size_t *matched) {
  ferry_class_key_t item;
  FERRY(ferry_db_find_class(&item, db, "Item"));
  double ms[64];
  int n = repeat > 64 ? 64 : repeat;
  for (int i = 0; i < n; i++) {
    ferry_results_t *r = NULL;
    double t0 = now();
    FERRY(ferry_db_query(&r, db, item, query, NULL, 0));
    FERRY(ferry_results_count(matched, r));
    ms[i] = (now() - t0) * 1000;
    ferry_results_free(r);
  }
  qsort(ms, (size_t)n, sizeof ms[0], cmp_double);
  double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  printf("    %-13s %-45s median %8.1f ms  (min %8.1f ms, %d runs)  %zu rows matched\n", label,
         query, median, ms[0], n, *matched);
  return median;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  int keep = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--keep")) keep = 1;
    else {
      fprintf(stderr, "usage: %s [--rows N] [--repeat R] [--dir DIR] [--keep]\n", argv[0]);
      return 2;
    }
  }
  if (rows == 0 || repeat < 1) return 2;
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
  char plain_path[1024], indexed_path[1024];
  snprintf(plain_path, sizeof plain_path, "%s/query-plain.ferry", dir);
  snprintf(indexed_path, sizeof indexed_path, "%s/query-indexed.ferry", dir);
  printf("query: %zu Item objects (complexity = n %% 10), Ferry %s\n", rows, ferry_version());

  double ins_plain, ins_indexed;
  ferry_db_t *plain = build(plain_path, false, &ins_plain);
  ferry_db_t *indexed = build(indexed_path, true, &ins_indexed);
  printf("  built: without index %.1f s (%.0f rows/s), with index %.1f s (%.0f rows/s)\n", ins_plain,
         rows / ins_plain, ins_indexed, rows / ins_indexed);

  size_t m_plain = 0, m_indexed = 0, s_plain = 0, s_indexed = 0;
  printf("  query + count:\n");
  double q_plain = time_query(plain, "no index", "complexity <= 4", &m_plain);
  double q_indexed = time_query(indexed, "indexed", "complexity <= 4", &m_indexed);
  const char *selective = "complexity == 3 AND ownerId == \"user-13\"";
  double sel_plain = time_query(plain, "no index", selective, &s_plain);
  double sel_indexed = time_query(indexed, "indexed", selective, &s_indexed);
  if (m_plain != m_indexed || s_plain != s_indexed) {
    fprintf(stderr, "query: the indexed and unindexed files disagree: %zu/%zu, %zu/%zu\n", m_plain,
            m_indexed, s_plain, s_indexed);
    return 1;
  }
  printf("  indexed/unindexed time: %.2f for complexity <= 4, %.2f for the selective query\n",
         q_indexed / q_plain, sel_indexed / sel_plain);
  printf("RESULT query_le4_noindex_ms=%.1f query_le4_indexed_ms=%.1f rows_matched=%zu "
         "selective_noindex_ms=%.1f selective_indexed_ms=%.1f\n",
         q_plain, q_indexed, m_plain, sel_plain, sel_indexed);

  ferry_db_free(plain);
  ferry_db_free(indexed);
  if (!keep) {
    remove_db(plain_path);
    remove_db(indexed_path);
    if (tmpdir[0]) rmdir(tmpdir);
  }
  return 0;
}
