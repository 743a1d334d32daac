/*
 * check.h — the tiny assertion kit shared by the C tests of libferry.
 *
 * Every CHECK prints file:line, what was expected and ferry_error_last() (code, name, message)
 * when it fails, then exits with status 1. With FERRY_CHECK_CONTINUE=1 in the environment a
 * failure is printed and the test goes on (to list every failure in one run; later checks may
 * then fail as a consequence), and check_done() exits with status 1. Include it first: it selects the POSIX/GNU feature
 * set the tests need (mkdtemp, nftw, pthread_cond_timedwait, ...).
 *
 * Temporary files live in one mkdtemp directory per test process (test_tmpdir()), removed at
 * exit by the process that created it (forked children leave it alone).
 */
#ifndef FERRY_TEST_CHECK_H
#define FERRY_TEST_CHECK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

static unsigned long check_count_ = 0;
static unsigned long check_failures_ = 0;

static void check_report_error_(void) {
  const ferry_error_t *e = ferry_error_last();
  if (e == NULL) {
    fprintf(stderr, "    ferry_error_last() returned NULL (the header promises never NULL)\n");
    return;
  }
  fprintf(stderr, "    ferry_error_last(): code %d (%s), message \"%s\"\n", e->code,
          ferry_strerror(e->code), e->message ? e->message : "(NULL message!)");
}

static void check_fail_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check_fail_(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s:%d: CHECK FAILED: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  check_report_error_();
  fflush(stderr);
  check_failures_++;
  const char *go_on = getenv("FERRY_CHECK_CONTINUE");
  if (go_on == NULL || strcmp(go_on, "1") != 0) exit(1);
}

/* A condition that must hold. */
#define CHECK(cond)                                                                     \
  do {                                                                                  \
    check_count_++;                                                                     \
    if (!(cond)) check_fail_(__FILE__, __LINE__, "%s", #cond);                          \
  } while (0)

/* A condition with a printf-style explanation. */
#define CHECKF(cond, ...)                                                               \
  do {                                                                                  \
    check_count_++;                                                                     \
    if (!(cond)) check_fail_(__FILE__, __LINE__, __VA_ARGS__);                          \
  } while (0)

/* A ferry call that must return FERRY_OK. */
#define CHECK_OK(expr)                                                                  \
  do {                                                                                  \
    check_count_++;                                                                     \
    int check_rc_ = (expr);                                                             \
    if (check_rc_ != FERRY_OK)                                                          \
      check_fail_(__FILE__, __LINE__, "%s returned %d (%s), expected FERRY_OK", #expr,   \
                  check_rc_, ferry_strerror(check_rc_));                                \
  } while (0)

/* Checks that the last error on this thread is `want` with a non-empty message. */
#define CHECK_LAST_ERROR(want)                                                          \
  do {                                                                                  \
    check_count_++;                                                                     \
    int check_want_ = (want);                                                           \
    const ferry_error_t *check_e_ = ferry_error_last();                                 \
    if (check_e_ == NULL || check_e_->code != check_want_ || check_e_->message == NULL || \
        check_e_->message[0] == '\0')                                                   \
      check_fail_(__FILE__, __LINE__,                                                   \
                  "ferry_error_last() should hold code %d (%s) with a non-empty message", \
                  check_want_, ferry_strerror(check_want_));                            \
  } while (0)

/* A ferry call that must fail with exactly `want`, leaving ferry_error_last() with that code
 * and a non-empty message. */
#define CHECK_ERR(expr, want)                                                           \
  do {                                                                                  \
    check_count_++;                                                                     \
    int check_rc_ = (expr);                                                             \
    if (check_rc_ != (want))                                                            \
      check_fail_(__FILE__, __LINE__, "%s returned %d (%s), expected %d (%s)", #expr,    \
                  check_rc_, ferry_strerror(check_rc_), (int)(want),                    \
                  ferry_strerror(want));                                                \
    CHECK_LAST_ERROR(want);                                                             \
  } while (0)

/* A ferry call that must fail with one of two codes (used only where the header leaves the
 * choice open; each use says why). */
#define CHECK_ERR2(expr, want1, want2)                                                  \
  do {                                                                                  \
    check_count_++;                                                                     \
    int check_rc2_ = (expr);                                                            \
    if (check_rc2_ != (want1) && check_rc2_ != (want2))                                 \
      check_fail_(__FILE__, __LINE__, "%s returned %d (%s), expected %d (%s) or %d (%s)", \
                  #expr, check_rc2_, ferry_strerror(check_rc2_), (int)(want1),          \
                  ferry_strerror(want1), (int)(want2), ferry_strerror(want2));          \
    CHECK_LAST_ERROR(check_rc2_);                                                       \
  } while (0)

/* A ferry call that must fail with one of the listed codes (only where the header leaves the
 * choice open; each use says why). */
#define CHECK_ERR_ANY(expr, ...)                                                        \
  do {                                                                                  \
    check_count_++;                                                                     \
    const int check_codes_[] = {__VA_ARGS__};                                           \
    int check_rc3_ = (expr);                                                            \
    bool check_found_ = false;                                                          \
    for (size_t check_i_ = 0; check_i_ < sizeof check_codes_ / sizeof check_codes_[0]; check_i_++) \
      if (check_rc3_ == check_codes_[check_i_]) check_found_ = true;                    \
    if (!check_found_)                                                                  \
      check_fail_(__FILE__, __LINE__, "%s returned %d (%s), expected one of {%s}", #expr, \
                  check_rc3_, ferry_strerror(check_rc3_), #__VA_ARGS__);                \
    if (check_rc3_ != FERRY_OK) CHECK_LAST_ERROR(check_rc3_);                           \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                              \
  do {                                                                                  \
    check_count_++;                                                                     \
    long long check_a_ = (long long)(a), check_b_ = (long long)(b);                     \
    if (check_a_ != check_b_)                                                           \
      check_fail_(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a, #b, check_a_,        \
                  check_b_);                                                            \
  } while (0)

#define CHECK_STREQ(a, b)                                                               \
  do {                                                                                  \
    check_count_++;                                                                     \
    const char *check_a_ = (a), *check_b_ = (b);                                        \
    if (check_a_ == NULL || check_b_ == NULL || strcmp(check_a_, check_b_) != 0)        \
      check_fail_(__FILE__, __LINE__, "%s == %s: \"%s\" != \"%s\"", #a, #b,              \
                  check_a_ ? check_a_ : "(NULL)", check_b_ ? check_b_ : "(NULL)");      \
  } while (0)

/* ---- temporary directory -------------------------------------------------------------- */

static char check_tmpdir_[512];
static pid_t check_tmpdir_owner_ = 0;

static int check_rm_entry_(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void check_tmpdir_remove_(void) {
  if (check_tmpdir_[0] != '\0' && getpid() == check_tmpdir_owner_) {
    nftw(check_tmpdir_, check_rm_entry_, 16, FTW_DEPTH | FTW_PHYS);
    check_tmpdir_[0] = '\0';
  }
}

/* The test's private temporary directory, created on first use and removed at exit. */
static const char *test_tmpdir(void) {
  if (check_tmpdir_[0] == '\0') {
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0') base = "/tmp";
    snprintf(check_tmpdir_, sizeof check_tmpdir_, "%s/ferry-test-XXXXXX", base);
    if (mkdtemp(check_tmpdir_) == NULL) {
      fprintf(stderr, "mkdtemp(%s): %s\n", check_tmpdir_, strerror(errno));
      exit(1);
    }
    check_tmpdir_owner_ = getpid();
    atexit(check_tmpdir_remove_);
  }
  return check_tmpdir_;
}

/* A path inside the temporary directory (kept in a small ring of buffers, so several paths
 * can be alive at once). */
static const char *test_path(const char *name) {
  static char ring[8][640];
  static unsigned next = 0;
  char *p = ring[next++ % 8];
  snprintf(p, sizeof ring[0], "%s/%s", test_tmpdir(), name);
  return p;
}

/* ---- opening databases and finding keys --------------------------------------------------- */

static inline int db_open_path(ferry_db_t **out, const char *path, const ferry_schema_t *schema,
                               int32_t delivery, bool synced) {
  ferry_db_options_t o;
  int rc = ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION);
  if (rc != FERRY_OK) return rc;
  o.path = path;
  o.schema = schema;
  o.delivery = delivery;
  o.synced = synced;
  return ferry_db_open(out, &o);
}

static inline int db_open_mem(ferry_db_t **out, const char *identifier,
                              const ferry_schema_t *schema, int32_t delivery) {
  ferry_db_options_t o;
  int rc = ferry_db_options_init(&o, FERRY_DB_OPTIONS_VERSION);
  if (rc != FERRY_OK) return rc;
  o.in_memory_identifier = identifier;
  o.schema = schema;
  o.delivery = delivery;
  return ferry_db_open(out, &o);
}

#define CLASS_KEY(db, name)                                                             \
  ({                                                                                    \
    ferry_class_key_t ck_ = 0;                                                          \
    CHECK_OK(ferry_db_find_class(&ck_, (db), (name)));                                  \
    ck_;                                                                                \
  })

#define PROP_KEY(db, cls, name)                                                         \
  ({                                                                                    \
    ferry_property_key_t pk_ = 0;                                                       \
    CHECK_OK(ferry_db_find_property(&pk_, (db), (cls), (name)));                        \
    pk_;                                                                                \
  })

/* Reads one property of the object with primary key *pk and compares it with expected. */
#define CHECK_STORED(db, cls, pk, prop, expected)                                       \
  do {                                                                                  \
    ferry_object_t *cs_obj_ = NULL;                                                     \
    ferry_value_t cs_val_ = v_null();                                                   \
    ferry_value_t cs_pk_ = (pk);                                                        \
    CHECK_OK(ferry_object_get(&cs_obj_, (db), (cls), &cs_pk_));                         \
    CHECK_OK(ferry_object_get_value(&cs_val_, cs_obj_, (prop)));                        \
    CHECK_VALUE(cs_val_, (expected));                                                   \
    if (cs_val_.type == FERRY_TYPE_STRING)                                              \
      CHECKF(cs_val_.u.string.data != NULL &&                                           \
                 cs_val_.u.string.data[cs_val_.u.string.size] == '\0',                  \
             "strings handed out by Ferry are NUL-terminated");                         \
    ferry_object_free(cs_obj_);                                                         \
  } while (0)

/* ---- small value helpers ---------------------------------------------------------------- */

static inline ferry_value_t v_null(void) {
  ferry_value_t v;
  memset(&v, 0, sizeof v);
  v.type = FERRY_TYPE_NULL;
  return v;
}
static inline ferry_value_t v_bool(bool b) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_BOOL;
  v.u.b = b;
  return v;
}
static inline ferry_value_t v_int(int64_t i) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_INT;
  v.u.i = i;
  return v;
}
static inline ferry_value_t v_double(double d) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_DOUBLE;
  v.u.d = d;
  return v;
}
static inline ferry_value_t v_strn(const char *s, size_t n) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_STRING;
  v.u.string.data = s;
  v.u.string.size = n;
  return v;
}
static inline ferry_value_t v_str(const char *s) { return v_strn(s, strlen(s)); }
static inline ferry_value_t v_bin(const void *p, size_t n) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_BINARY;
  v.u.binary.data = (const uint8_t *)p;
  v.u.binary.size = n;
  return v;
}
static inline ferry_value_t v_ts(int64_t s, int32_t ns) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_TIMESTAMP;
  v.u.timestamp.seconds = s;
  v.u.timestamp.nanoseconds = ns;
  return v;
}
static inline ferry_value_t v_oid_bytes(const uint8_t b[12]) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_OBJECT_ID;
  memcpy(v.u.object_id, b, 12);
  return v;
}
/* A deterministic ObjectId whose last bytes hold n. */
static inline ferry_value_t v_oid_n(uint32_t n) {
  uint8_t b[12] = {0x65, 0x00, 0x00, 0x01, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0, 0, 0};
  b[9] = (uint8_t)(n >> 16);
  b[10] = (uint8_t)(n >> 8);
  b[11] = (uint8_t)n;
  return v_oid_bytes(b);
}
static inline ferry_value_t v_uuid_bytes(const uint8_t b[16]) {
  ferry_value_t v = v_null();
  v.type = FERRY_TYPE_UUID;
  memcpy(v.u.uuid, b, 16);
  return v;
}

static inline ferry_property_value_t pv(ferry_property_key_t key, ferry_value_t value) {
  ferry_property_value_t p;
  p.property = key;
  p.value = value;
  return p;
}

/* Whether two values are equal (doubles bitwise, so NaN == NaN and -0.0 != 0.0). */
static inline bool value_equal(const ferry_value_t *a, const ferry_value_t *b) {
  if (a->type != b->type) return false;
  switch (a->type) {
    case FERRY_TYPE_NULL: return true;
    case FERRY_TYPE_BOOL: return a->u.b == b->u.b;
    case FERRY_TYPE_INT: return a->u.i == b->u.i;
    case FERRY_TYPE_DOUBLE: return memcmp(&a->u.d, &b->u.d, sizeof(double)) == 0;
    case FERRY_TYPE_STRING:
      return a->u.string.size == b->u.string.size &&
             (a->u.string.size == 0 ||
              memcmp(a->u.string.data, b->u.string.data, a->u.string.size) == 0);
    case FERRY_TYPE_BINARY:
      return a->u.binary.size == b->u.binary.size &&
             (a->u.binary.size == 0 ||
              memcmp(a->u.binary.data, b->u.binary.data, a->u.binary.size) == 0);
    case FERRY_TYPE_TIMESTAMP:
      return a->u.timestamp.seconds == b->u.timestamp.seconds &&
             a->u.timestamp.nanoseconds == b->u.timestamp.nanoseconds;
    case FERRY_TYPE_OBJECT_ID: return memcmp(a->u.object_id, b->u.object_id, 12) == 0;
    case FERRY_TYPE_UUID: return memcmp(a->u.uuid, b->u.uuid, 16) == 0;
    default: return false;
  }
}

/* Formats a value for failure messages (static buffer: one use per printf). */
static inline const char *value_str(const ferry_value_t *v) {
  static char buf[4][256];
  static unsigned next = 0;
  char *b = buf[next++ % 4];
  switch (v->type) {
    case FERRY_TYPE_NULL: snprintf(b, 256, "null"); break;
    case FERRY_TYPE_BOOL: snprintf(b, 256, "bool %s", v->u.b ? "true" : "false"); break;
    case FERRY_TYPE_INT: snprintf(b, 256, "int %" PRId64, v->u.i); break;
    case FERRY_TYPE_DOUBLE: snprintf(b, 256, "double %.17g", v->u.d); break;
    case FERRY_TYPE_STRING:
      snprintf(b, 256, "string(%zu) \"%.*s\"", v->u.string.size,
               (int)(v->u.string.size > 200 ? 200 : v->u.string.size),
               v->u.string.data ? v->u.string.data : "");
      break;
    case FERRY_TYPE_BINARY: snprintf(b, 256, "binary(%zu)", v->u.binary.size); break;
    case FERRY_TYPE_TIMESTAMP:
      snprintf(b, 256, "timestamp %" PRId64 "s %dns", v->u.timestamp.seconds,
               v->u.timestamp.nanoseconds);
      break;
    case FERRY_TYPE_OBJECT_ID: {
      int n = snprintf(b, 256, "oid ");
      for (int i = 0; i < 12; i++) n += snprintf(b + n, 256 - (size_t)n, "%02x", v->u.object_id[i]);
      break;
    }
    case FERRY_TYPE_UUID: {
      int n = snprintf(b, 256, "uuid ");
      for (int i = 0; i < 16; i++) n += snprintf(b + n, 256 - (size_t)n, "%02x", v->u.uuid[i]);
      break;
    }
    default: snprintf(b, 256, "type %d", v->type); break;
  }
  return b;
}

#define CHECK_VALUE(actual, expected)                                                   \
  do {                                                                                  \
    check_count_++;                                                                     \
    ferry_value_t check_va_ = (actual), check_vb_ = (expected);                         \
    if (!value_equal(&check_va_, &check_vb_))                                           \
      check_fail_(__FILE__, __LINE__, "%s == %s: %s != %s", #actual, #expected,          \
                  value_str(&check_va_), value_str(&check_vb_));                        \
  } while (0)

/* Prints the summary line; call at the end of main. */
static inline int check_done(const char *name) {
  if (check_failures_ > 0) {
    printf("%s: %lu of %lu checks FAILED\n", name, check_failures_, check_count_);
    return 1;
  }
  printf("%s: all %lu checks passed\n", name, check_count_);
  return 0;
}

#endif /* FERRY_TEST_CHECK_H */
