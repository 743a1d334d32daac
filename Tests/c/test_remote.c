/*
 * test_remote.c — ferry_remote_find and ferry_remote_count (issue 24): a device queries the
 * server's data online with its user's rules, without subscribing or storing anything.
 *
 * Against ferry-server on Tests/Fixtures/data-api-app (the seeds' Item app with the Data API on
 * and a Reading class with a property of every value type; owner-only rules on both). Two
 * users: A's device writes 1,200 Items and five Readings with known values (Int64's ends,
 * strings with quotes, newlines and non-ASCII, timestamps before 1970 and with nanoseconds, a
 * binary, a UUID, nulls, a list), B's device three Items and a Reading; both wait for upload.
 * The oracle is what the test wrote:
 *  - find as A returns exactly A's objects with the values written, in primary-key order
 *    (the order A made its ObjectIds), limit 1,100 exactly 1,100 of them (two requests: the
 *    server's page is at most 1,000), a higher limit all 1,200; as B exactly B's;
 *  - count matches (1,200 and 3; with a filter, the written values that pass it);
 *  - filters with $0 arguments of every type select what the written values say;
 *  - the local databases are unchanged by the remote calls (objects and history);
 *  - SORT and LIMIT: one page in the filter's order;
 *  - errors: unknown class, a filter the server refuses, count with SORT, $n past the arguments, NULL and
 *    bad arguments, a logged-out user, the Data API off (a server on examples/item-app).
 *
 * Exits 77 (CTest: skipped) without a server binary.
 */
#include "check.h"
#include "sync_server.h"
#include "sync_waiters.h"

#define ITEMS 1200

static ferry_schema_t *schema;

enum { C_ITEM = 0, C_READING = 1 };
enum { R_ID = 0, R_OWNER, R_LABEL, R_VALUE, R_RATIO, R_TAKEN, R_BLOB, R_REF, R_NOTE, R_SAMPLES };

static void make_schema(void) {
  static const ferry_property_info_t item[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, 0, NULL},
      {"itemName", FERRY_TYPE_STRING, 0, NULL},
      {"complexity", FERRY_TYPE_INT, 0, NULL},
  };
  static const ferry_property_info_t reading[] = {
      {"_id", FERRY_TYPE_OBJECT_ID, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"ownerId", FERRY_TYPE_STRING, 0, NULL},
      {"label", FERRY_TYPE_STRING, 0, NULL},
      {"value", FERRY_TYPE_INT, 0, NULL},
      {"ratio", FERRY_TYPE_DOUBLE, 0, NULL},
      {"taken", FERRY_TYPE_TIMESTAMP, 0, NULL},
      {"blob", FERRY_TYPE_BINARY, 0, NULL},
      {"ref", FERRY_TYPE_UUID, FERRY_PROPERTY_OPTIONAL, NULL},
      {"note", FERRY_TYPE_STRING, FERRY_PROPERTY_OPTIONAL, NULL},
      {"samples", FERRY_TYPE_INT, FERRY_PROPERTY_LIST, NULL},
  };
  ferry_class_info_t classes[] = {{"Item", item, 4, 0}, {"Reading", reading, 10, 0}};
  CHECK_OK(ferry_schema_new(&schema, classes, 2));
}

/* ---- the readings A writes: the oracle ------------------------------------------------------- */

struct reading {
  ferry_value_t id;
  const char *label;
  int64_t value;
  double ratio;
  int64_t seconds;
  int32_t nanoseconds;
  uint8_t blob[5];
  size_t blob_size;
  bool has_ref;
  uint8_t ref[16];
  const char *note; /* NULL: null */
  int64_t samples[3];
  size_t sample_count;
};

static struct reading readings[5] = {
    {.label = "plain", .value = INT64_MAX, .ratio = 0.5, .seconds = 1764403200, .nanoseconds = 0,
     .blob = {1, 2, 3}, .blob_size = 3, .has_ref = true,
     .ref = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef},
     .note = "a note", .samples = {1, -2, INT64_MIN}, .sample_count = 3},
    {.label = "quote \" backslash \\ newline \n tab \t end", .value = INT64_MIN, .ratio = -1e300,
     .seconds = -86400 * 365 - 1, .nanoseconds = 123456789, .blob_size = 0, .note = NULL, .sample_count = 0},
    {.label = "unicode: \xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\xa2", .value = 9007199254740993LL /* 2^53 + 1 */,
     .ratio = 3.0, .seconds = 0, .nanoseconds = 1, .blob = {0, 255, 0, 128, 7}, .blob_size = 5, .note = "",
     .samples = {9007199254740993LL}, .sample_count = 1},
    {.label = "zero", .value = 0, .ratio = 1.0 / 3.0, .seconds = 253402300800LL /* year 10000 */, .nanoseconds = 500000000,
     .blob = {42}, .blob_size = 1, .note = "x", .sample_count = 0},
    {.label = "minus one", .value = -1, .ratio = 2.5e-8, .seconds = 1000, .nanoseconds = 999000000, .blob_size = 0,
     .has_ref = true, .ref = {0xff}, .note = NULL, .samples = {0, 0}, .sample_count = 2},
};

/* ---- devices ------------------------------------------------------------------------------------ */

static void device_up(struct device *d, const char *name) {
  device_dirs(d, name, NULL);
  d->app = app_on(d->dir, base_url);
  device_login(d, anonymous, false);
  ferry_sync_options_t so;
  CHECK_OK(ferry_sync_options_init(&so, FERRY_SYNC_OPTIONS_VERSION));
  so.path = d->db_path;
  so.schema = schema;
  CHECK_OK(ferry_sync_open(&d->session, &d->db, d->user, &so));
  CHECK_OUTCOME_OK(wait_download(d->session), "the first download");
  /* Its own objects of both classes, so its writes are in its view (not reverted). */
  char query[256];
  snprintf(query, sizeof query, "ownerId == '%s'", d->user_id);
  ferry_subscription_set_t *set = NULL;
  CHECK_OK(ferry_sync_subscriptions(&set, d->session));
  CHECK_OK(ferry_subscription_set_add(set, "items", "Item", query));
  CHECK_OK(ferry_subscription_set_add(set, "readings", "Reading", query));
  uint64_t version = 0;
  CHECK_OK(ferry_sync_update_subscriptions(&version, d->session, set));
  ferry_subscription_set_free(set);
  struct waiter *w = waiter_new();
  CHECK_OUTCOME_OK(finish(ferry_sync_wait_for_subscriptions(d->session, version, on_status, w), w, "subscriptions"),
                   "subscriptions");
}

static void create_item(struct device *d, ferry_value_t id, int64_t complexity) {
  char name[32];
  snprintf(name, sizeof name, "item-%04lld", (long long)complexity);
  ferry_property_value_t vals[] = {pv(0, id), pv(1, v_str(d->user_id)), pv(2, v_str(name)), pv(3, v_int(complexity))};
  CHECK_OK(ferry_object_create(d->db, C_ITEM, vals, 4));
}

static void create_reading(struct device *d, struct reading *r) {
  r->id = new_oid();
  ferry_property_value_t vals[] = {
      pv(R_ID, r->id),
      pv(R_OWNER, v_str(d->user_id)),
      pv(R_LABEL, v_str(r->label)),
      pv(R_VALUE, v_int(r->value)),
      pv(R_RATIO, v_double(r->ratio)),
      pv(R_TAKEN, v_ts(r->seconds, r->nanoseconds)),
      pv(R_BLOB, v_bin(r->blob, r->blob_size)),
      pv(R_REF, r->has_ref ? v_uuid_bytes(r->ref) : v_null()),
      pv(R_NOTE, r->note ? v_str(r->note) : v_null()),
  };
  CHECK_OK(ferry_object_create(d->db, C_READING, vals, 9));
  for (size_t i = 0; i < r->sample_count; i++) {
    ferry_value_t sample = v_int(r->samples[i]);
    CHECK_OK(ferry_list_insert(d->db, C_READING, &r->id, R_SAMPLES, i, &sample));
  }
}

/* ---- remote calls and their completions -------------------------------------------------------- */

struct remote_waiter {
  struct waiter w;
  ferry_remote_results_t *results;
  uint64_t count;
  bool results_and_error;
};

static void on_find(void *userdata, ferry_remote_results_t *results, const ferry_error_t *error) {
  struct remote_waiter *rw = userdata;
  pthread_mutex_lock(&rw->w.mu);
  record(&rw->w, error);
  if ((results != NULL) == (error != NULL)) rw->results_and_error = true;
  if (rw->results) ferry_remote_results_free(rw->results); /* a second call: counted, not leaked */
  rw->results = results;
  rw->w.calls++;
  pthread_cond_broadcast(&rw->w.cv);
  pthread_mutex_unlock(&rw->w.mu);
}

static void on_count(void *userdata, uint64_t count, const ferry_error_t *error) {
  struct remote_waiter *rw = userdata;
  pthread_mutex_lock(&rw->w.mu);
  record(&rw->w, error);
  if (error != NULL && count != 0) rw->results_and_error = true;
  rw->count = count;
  rw->w.calls++;
  pthread_cond_broadcast(&rw->w.cv);
  pthread_mutex_unlock(&rw->w.mu);
}

static struct remote_waiter *remote_waiter_new(void) {
  struct remote_waiter *rw = calloc(1, sizeof *rw);
  CHECK(rw != NULL);
  pthread_mutex_init(&rw->w.mu, NULL);
  cond_init_monotonic(&rw->w.cv);
  rw->w.code = -9999;
  return rw;
}

/* The outcome of a call: the call's own code when it failed (no callback then, checked by
 * waiting a moment: none may come), else the completion's. */
struct remote_outcome {
  int code;
  char message[1024];
  ferry_remote_results_t *results;
  uint64_t count;
};

static struct remote_outcome remote_finish(int rc, struct remote_waiter *rw, const char *what) {
  struct remote_outcome o = {rc, "", NULL, 0};
  if (rc != FERRY_OK) {
    snprintf(o.message, sizeof o.message, "%s", ferry_error_last()->message);
    CHECKF(!waiter_wait_for(&rw->w, 0.1), "%s failed (%d) and still called back", what, rc);
    pthread_mutex_destroy(&rw->w.mu);
    pthread_cond_destroy(&rw->w.cv);
    free(rw);
    return o;
  }
  if (!waiter_wait(&rw->w)) {
    CHECKF(false, "%s: no completion within %d s", what, WAIT_SECONDS);
    o.code = -9999;
    return o; /* rw leaked on purpose */
  }
  pthread_mutex_lock(&rw->w.mu);
  o.code = rw->w.code;
  snprintf(o.message, sizeof o.message, "%s", rw->w.message);
  o.results = rw->results;
  o.count = rw->count;
  CHECKF(rw->w.calls == 1, "%s: completion called %d times", what, rw->w.calls);
  CHECKF(!rw->results_and_error, "%s: results with an error, or neither", what);
  CHECKF(!rw->w.on_main_thread, "%s: the completion ran on the host's thread, not the loop thread", what);
  pthread_mutex_unlock(&rw->w.mu);
  pthread_mutex_destroy(&rw->w.mu);
  pthread_cond_destroy(&rw->w.cv);
  free(rw);
  return o;
}

static struct remote_outcome find(ferry_user_t *u, const char *cls, const char *query, const ferry_value_t *args, size_t n,
                                  size_t limit) {
  struct remote_waiter *rw = remote_waiter_new();
  return remote_finish(ferry_remote_find(u, cls, query, args, n, limit, on_find, rw), rw, "ferry_remote_find");
}

static struct remote_outcome count(ferry_user_t *u, const char *cls, const char *query, const ferry_value_t *args, size_t n) {
  struct remote_waiter *rw = remote_waiter_new();
  return remote_finish(ferry_remote_count(u, cls, query, args, n, on_count, rw), rw, "ferry_remote_count");
}

/* A find that must succeed, with exactly `want` results. */
static ferry_remote_results_t *find_ok(ferry_user_t *u, const char *cls, const char *query, const ferry_value_t *args, size_t n,
                                       size_t limit, size_t want) {
  struct remote_outcome o = find(u, cls, query, args, n, limit);
  CHECKF(o.code == FERRY_OK, "find %s '%s': %d (%s) %s", cls, query, o.code, ferry_strerror(o.code), o.message);
  size_t got = 0;
  CHECK_OK(ferry_remote_results_count(&got, o.results));
  CHECKF(got == want, "find %s '%s' limit %zu: %zu objects, want %zu", cls, query, limit, got, want);
  return o.results;
}

static uint64_t count_ok(ferry_user_t *u, const char *cls, const char *query, const ferry_value_t *args, size_t n) {
  struct remote_outcome o = count(u, cls, query, args, n);
  CHECKF(o.code == FERRY_OK, "count %s '%s': %d (%s) %s", cls, query, o.code, ferry_strerror(o.code), o.message);
  return o.count;
}

static void check_error(struct remote_outcome o, int want, const char *needle, const char *what) {
  CHECKF(o.code == want, "%s: %d (%s) \"%s\", want %d (%s)", what, o.code, ferry_strerror(o.code), o.message, want,
         ferry_strerror(want));
  CHECKF(o.results == NULL, "%s: results with an error", what);
  if (needle) CHECKF(strstr(o.message, needle) != NULL, "%s: the message \"%s\" should say \"%s\"", what, o.message, needle);
  ferry_remote_results_free(o.results);
}

static ferry_value_t get(ferry_remote_results_t *r, size_t i, const char *name) {
  ferry_value_t v;
  CHECK_OK(ferry_remote_results_get_value(&v, r, i, name));
  return v;
}

static bool same_oid(ferry_value_t a, ferry_value_t b) {
  return a.type == FERRY_TYPE_OBJECT_ID && b.type == FERRY_TYPE_OBJECT_ID && memcmp(a.u.object_id, b.u.object_id, 12) == 0;
}

static bool same_str(ferry_value_t v, const char *s) {
  return v.type == FERRY_TYPE_STRING && v.u.string.size == strlen(s) && memcmp(v.u.string.data, s, v.u.string.size) == 0;
}

/* ---- the tests ------------------------------------------------------------------------------------ */

static struct device a, b;
static ferry_value_t item_ids[ITEMS];
static ferry_value_t b_item_ids[3];

/* The local state of a device: objects of both classes and history length. */
struct local_state {
  size_t items, readings;
  uint64_t history;
};

static struct local_state local_state(struct device *d) {
  struct local_state s = {0, 0, 0};
  ferry_results_t *r = NULL;
  CHECK_OK(ferry_db_query(&r, d->db, C_ITEM, "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&s.items, r));
  ferry_results_free(r);
  CHECK_OK(ferry_db_query(&r, d->db, C_READING, "TRUEPREDICATE", NULL, 0));
  CHECK_OK(ferry_results_count(&s.readings, r));
  ferry_results_free(r);
  CHECK_OK(ferry_db_history_count(&s.history, d->db));
  return s;
}

static void check_unchanged(struct device *d, struct local_state before, const char *who) {
  struct local_state after = local_state(d);
  CHECKF(after.items == before.items && after.readings == before.readings && after.history == before.history,
         "%s's local database changed under remote calls: items %zu -> %zu, readings %zu -> %zu, history %llu -> %llu", who,
         before.items, after.items, before.readings, after.readings, (unsigned long long)before.history,
         (unsigned long long)after.history);
}

static void write_data(void) {
  CHECK_OK(ferry_db_begin_write(a.db));
  for (int i = 0; i < ITEMS; i++) {
    item_ids[i] = new_oid();
    create_item(&a, item_ids[i], i);
  }
  for (size_t i = 0; i < 5; i++) create_reading(&a, &readings[i]);
  CHECK_OK(ferry_db_commit(a.db));

  CHECK_OK(ferry_db_begin_write(b.db));
  for (int i = 0; i < 3; i++) {
    b_item_ids[i] = new_oid();
    create_item(&b, b_item_ids[i], 10 * i);
  }
  struct reading rb = {.label = "B's", .value = 7, .ratio = 7.5, .seconds = 7, .blob_size = 0};
  create_reading(&b, &rb);
  CHECK_OK(ferry_db_commit(b.db));
  CHECK_OUTCOME_OK(wait_upload(a.session), "A's upload");
  CHECK_OUTCOME_OK(wait_upload(b.session), "B's upload");
}

static void test_items_by_rules_and_pages(void) {
  struct local_state a_before = local_state(&a), b_before = local_state(&b);
  CHECK_EQ_INT((int)a_before.items, ITEMS);
  CHECK_EQ_INT((int)b_before.items, 3);

  /* 1,100 of A's 1,200: two requests (1,000 + 100), in primary-key order = creation order. */
  ferry_remote_results_t *r = find_ok(a.user, "Item", "TRUEPREDICATE", NULL, 0, 1100, 1100);
  for (size_t i = 0; i < 1100; i++) {
    CHECKF(same_oid(get(r, i, "_id"), item_ids[i]), "object %zu is not the %zu-th item A wrote", i, i);
    CHECK(same_str(get(r, i, "ownerId"), a.user_id));
    ferry_value_t c = get(r, i, "complexity");
    CHECKF(c.type == FERRY_TYPE_INT && c.u.i == (int64_t)i, "object %zu: complexity %lld", i, (long long)c.u.i);
    char name[32];
    snprintf(name, sizeof name, "item-%04zu", i);
    CHECK(same_str(get(r, i, "itemName"), name));
  }
  /* the Extended JSON text and the fields */
  const char *json = NULL;
  CHECK_OK(ferry_remote_results_json(&json, r, 5));
  char oid[25], want[256];
  oid_hex(oid, &item_ids[5]);
  snprintf(want, sizeof want, "{\"_id\":{\"$oid\":\"%s\"},\"complexity\":5,\"itemName\":\"item-0005\",\"ownerId\":\"%s\"}", oid,
           a.user_id);
  CHECKF(strcmp(json, want) == 0, "object 5's JSON: %s\nwant %s", json, want);
  size_t fields = 0;
  CHECK_OK(ferry_remote_results_field_count(&fields, r, 5));
  CHECK_EQ_INT((int)fields, 4);
  const char *name = NULL;
  bool is_list = true;
  CHECK_OK(ferry_remote_results_field(&name, &is_list, r, 5, 1));
  CHECK_STREQ(name, "complexity");
  CHECK(!is_list);
  CHECK_OK(ferry_remote_results_field(NULL, NULL, r, 5, 3));
  CHECK_ERR(ferry_remote_results_field(&name, NULL, r, 5, 4), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_remote_results_json(&json, r, 1100), FERRY_ERR_OUT_OF_RANGE);
  ferry_value_t v;
  CHECK_ERR(ferry_remote_results_get_value(&v, r, 0, "nope"), FERRY_ERR_NO_SUCH_PROPERTY);
  CHECK_ERR(ferry_remote_results_get_value(&v, r, 1100, "_id"), FERRY_ERR_OUT_OF_RANGE);
  CHECK_ERR(ferry_remote_results_get_value(&v, r, 0, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_remote_results_get_value(NULL, r, 0, "_id"), FERRY_ERR_INVALID_ARGUMENT);
  const ferry_value_t *list = NULL;
  size_t list_count = 0;
  CHECK_ERR(ferry_remote_results_get_list(&list, &list_count, r, 0, "complexity"), FERRY_ERR_WRONG_TYPE);
  ferry_remote_results_free(r);

  /* every one of A's, and none of B's */
  r = find_ok(a.user, "Item", "TRUEPREDICATE", NULL, 0, FERRY_REMOTE_FIND_MAX_LIMIT, ITEMS);
  for (size_t i = 0; i < ITEMS; i++) CHECK(same_oid(get(r, i, "_id"), item_ids[i]));
  ferry_remote_results_free(r);
  /* B sees exactly its three */
  r = find_ok(b.user, "Item", "TRUEPREDICATE", NULL, 0, 100, 3);
  for (size_t i = 0; i < 3; i++) {
    CHECK(same_oid(get(r, i, "_id"), b_item_ids[i]));
    CHECK(same_str(get(r, i, "ownerId"), b.user_id));
    CHECK_EQ_INT((int)get(r, i, "complexity").u.i, (int)(10 * i));
  }
  ferry_remote_results_free(r);
  /* limit 1 */
  r = find_ok(a.user, "Item", "TRUEPREDICATE", NULL, 0, 1, 1);
  CHECK(same_oid(get(r, 0, "_id"), item_ids[0]));
  ferry_remote_results_free(r);

  CHECK_EQ_INT((int)count_ok(a.user, "Item", "TRUEPREDICATE", NULL, 0), ITEMS);
  CHECK_EQ_INT((int)count_ok(b.user, "Item", "TRUEPREDICATE", NULL, 0), 3);

  /* $0 arguments */
  ferry_value_t range[] = {v_int(100), v_int(150)};
  r = find_ok(a.user, "Item", "complexity >= $0 AND complexity < $1", range, 2, 1000, 50);
  for (size_t i = 0; i < 50; i++) CHECK_EQ_INT((int)get(r, i, "complexity").u.i, (int)(100 + i));
  ferry_remote_results_free(r);
  CHECK_EQ_INT((int)count_ok(a.user, "Item", "complexity >= $0 AND complexity < $1", range, 2), 50);
  /* B's rules still apply under a filter that matches A's objects */
  CHECK_EQ_INT((int)count_ok(b.user, "Item", "complexity >= $0 AND complexity < $1", range, 2), 0);
  ferry_value_t name_arg = v_str("item-0007");
  r = find_ok(a.user, "Item", "itemName == $0", &name_arg, 1, 10, 1);
  CHECK(same_oid(get(r, 0, "_id"), item_ids[7]));
  ferry_remote_results_free(r);
  r = find_ok(a.user, "Item", "_id == $0", &item_ids[1199], 1, 10, 1);
  CHECK_EQ_INT((int)get(r, 0, "complexity").u.i, 1199);
  ferry_remote_results_free(r);
  /* A's id asked by B: not readable, so not there */
  r = find_ok(b.user, "Item", "_id == $0", &item_ids[3], 1, 10, 0);
  ferry_remote_results_free(r);

  check_unchanged(&a, a_before, "A");
  check_unchanged(&b, b_before, "B");
}

static void test_reading_values(void) {
  struct local_state a_before = local_state(&a);
  ferry_remote_results_t *r = find_ok(a.user, "Reading", "TRUEPREDICATE", NULL, 0, 100, 5);
  for (size_t i = 0; i < 5; i++) {
    const struct reading *w = &readings[i];
    CHECK(same_oid(get(r, i, "_id"), w->id));
    CHECK(same_str(get(r, i, "ownerId"), a.user_id));
    CHECKF(same_str(get(r, i, "label"), w->label), "reading %zu: the label did not come back as written", i);
    ferry_value_t v = get(r, i, "value");
    CHECKF(v.type == FERRY_TYPE_INT && v.u.i == w->value, "reading %zu: value %lld (type %d), want %lld", i, (long long)v.u.i,
           v.type, (long long)w->value);
    v = get(r, i, "ratio");
    CHECKF(v.type == FERRY_TYPE_DOUBLE && v.u.d == w->ratio, "reading %zu: ratio %.17g (type %d), want %.17g", i, v.u.d, v.type,
           w->ratio);
    v = get(r, i, "taken");
    CHECKF(v.type == FERRY_TYPE_TIMESTAMP && v.u.timestamp.seconds == w->seconds && v.u.timestamp.nanoseconds == w->nanoseconds,
           "reading %zu: taken %lld.%09d, want %lld.%09d", i, (long long)v.u.timestamp.seconds, v.u.timestamp.nanoseconds,
           (long long)w->seconds, w->nanoseconds);
    v = get(r, i, "blob");
    CHECKF(v.type == FERRY_TYPE_BINARY && v.u.binary.size == w->blob_size &&
               (w->blob_size == 0 || memcmp(v.u.binary.data, w->blob, w->blob_size) == 0),
           "reading %zu: blob", i);
    v = get(r, i, "ref");
    if (w->has_ref)
      CHECKF(v.type == FERRY_TYPE_UUID && memcmp(v.u.uuid, w->ref, 16) == 0, "reading %zu: ref", i);
    else
      CHECKF(v.type == FERRY_TYPE_NULL, "reading %zu: ref should be null, is type %d", i, v.type);
    v = get(r, i, "note");
    if (w->note)
      CHECK(same_str(v, w->note));
    else
      CHECK(v.type == FERRY_TYPE_NULL);
    const ferry_value_t *list = NULL;
    size_t n = 99;
    CHECK_OK(ferry_remote_results_get_list(&list, &n, r, i, "samples"));
    CHECKF(n == w->sample_count, "reading %zu: %zu samples, want %zu", i, n, w->sample_count);
    for (size_t k = 0; k < n && k < w->sample_count; k++)
      CHECKF(list[k].type == FERRY_TYPE_INT && list[k].u.i == w->samples[k], "reading %zu sample %zu: %lld", i, k,
             (long long)list[k].u.i);
    if (n == 0) CHECK(list == NULL);
    bool is_list = false;
    size_t fields = 0;
    CHECK_OK(ferry_remote_results_field_count(&fields, r, i));
    CHECK_EQ_INT((int)fields, 10);
    for (size_t f = 0; f < fields; f++) {
      const char *name = NULL;
      CHECK_OK(ferry_remote_results_field(&name, &is_list, r, i, f));
      CHECK(is_list == (strcmp(name, "samples") == 0));
    }
    CHECK_ERR(ferry_remote_results_get_value(&v, r, i, "samples"), FERRY_ERR_WRONG_TYPE);
  }
  /* The JSON text of the second: escapes, Int64.min, a date before 1970 with nanoseconds. */
  const char *json = NULL;
  CHECK_OK(ferry_remote_results_json(&json, r, 1));
  CHECKF(strstr(json, "\"label\":\"quote \\\" backslash \\\\ newline \\n tab \\t end\"") != NULL, "reading 1's JSON: %s", json);
  CHECKF(strstr(json, "\"value\":-9223372036854775808") != NULL, "reading 1's JSON: %s", json);
  CHECKF(strstr(json, "\"taken\":{\"$date\":\"1968-12-31T23:59:59.123456789Z\"}") != NULL, "reading 1's JSON: %s", json);
  CHECKF(strstr(json, "\"note\":null") != NULL, "reading 1's JSON: %s", json);
  CHECK_OK(ferry_remote_results_json(&json, r, 3));
  CHECKF(strstr(json, "\"taken\":{\"$date\":\"+010000-01-01T00:00:00.500Z\"}") != NULL, "reading 3's JSON: %s", json);
  ferry_remote_results_free(r);

  /* arguments of every type select what the written values say */
  struct {
    const char *query;
    ferry_value_t arg;
    size_t want;
    int first; /* index in readings of the first result */
  } cases[] = {
      {"value == $0", v_int(INT64_MIN), 1, 1},
      {"value == $0", v_int(INT64_MAX), 1, 0},
      {"value == $0", v_int(9007199254740992LL), 0, -1}, /* 2^53: a double would have matched 2^53 + 1 */
      {"value > $0", v_int(-1), 3, 0},
      {"ratio < $0", v_double(0.4), 3, 1},
      {"taken < $0", v_ts(0, 1), 1, 1},
      {"taken >= $0", v_ts(0, 1), 4, 0},
      {"label == $0", v_str(readings[2].label), 1, 2},
      {"label == $0", v_str(readings[1].label), 1, 1},
      {"_id == $0", readings[4].id, 1, 4},
      {"ref == $0", v_uuid_bytes(readings[0].ref), 1, 0},
      {"note == $0", v_null(), 2, 1},
      {"blob == $0", v_bin(readings[2].blob, 5), 1, 2},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    r = find_ok(a.user, "Reading", cases[c].query, &cases[c].arg, 1, 100, cases[c].want);
    if (cases[c].first >= 0 && cases[c].want > 0)
      CHECKF(same_oid(get(r, 0, "_id"), readings[cases[c].first].id), "case %zu (%s): not the reading expected", c, cases[c].query);
    ferry_remote_results_free(r);
    CHECKF(count_ok(a.user, "Reading", cases[c].query, &cases[c].arg, 1) == cases[c].want, "count case %zu (%s)", c,
           cases[c].query);
  }
  /* B: its one reading */
  CHECK_EQ_INT((int)count_ok(b.user, "Reading", "TRUEPREDICATE", NULL, 0), 1);
  check_unchanged(&a, a_before, "A");
}

/* SORT and LIMIT in the filter: the server answers one page in the filter's order. */
static void test_sorted(void) {
  ferry_remote_results_t *r = find_ok(a.user, "Item", "complexity < 10 SORT(complexity DESC) LIMIT(3)", NULL, 0, 10, 3);
  for (size_t i = 0; i < 3; i++) CHECK_EQ_INT((int)get(r, i, "complexity").u.i, (int)(9 - i));
  ferry_remote_results_free(r);
  r = find_ok(a.user, "Item", "complexity >= 1190 SORT(complexity ASC)", NULL, 0, 4, 4);
  for (size_t i = 0; i < 4; i++) CHECK_EQ_INT((int)get(r, i, "complexity").u.i, (int)(1190 + i));
  ferry_remote_results_free(r);
}

static void test_errors(void) {
  ferry_value_t one = v_int(1);
  check_error(find(a.user, "NoSuchClass", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_NO_SUCH_CLASS, "NoSuchClass", "unknown class");
  check_error(count(a.user, "NoSuchClass", "TRUEPREDICATE", NULL, 0), FERRY_ERR_NO_SUCH_CLASS, "ClassNotFound", "count unknown class");
  check_error(find(a.user, "Item", "complexity >>> 3", NULL, 0, 10), FERRY_ERR_QUERY, "InvalidParameter", "bad filter");
  check_error(count(a.user, "Item", "nope == 3", NULL, 0), FERRY_ERR_QUERY, "nope", "count with an unknown property");
  check_error(count(a.user, "Item", "complexity > 3 SORT(complexity ASC)", NULL, 0), FERRY_ERR_QUERY, "SORT", "count with SORT");
  check_error(find(a.user, "Item", "complexity == $1", &one, 1, 10), FERRY_ERR_QUERY, NULL, "$1 past the arguments");
  ferry_value_t text = v_str("three");
  check_error(find(a.user, "Item", "complexity == $0", &text, 1, 10), FERRY_ERR_QUERY, NULL, "an argument of the wrong type");

  /* the call's own errors: no callback */
  check_error(find(NULL, "Item", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_INVALID_HANDLE, NULL, "NULL user");
  check_error(find((ferry_user_t *)a.db, "Item", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_INVALID_HANDLE, NULL, "a database as user");
  check_error(find(a.user, NULL, "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_INVALID_ARGUMENT, "class_name", "NULL class");
  check_error(find(a.user, "", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_INVALID_ARGUMENT, "class_name", "empty class");
  check_error(find(a.user, "Item", NULL, NULL, 0, 10), FERRY_ERR_INVALID_ARGUMENT, "query", "NULL query");
  check_error(find(a.user, "Item", "TRUEPREDICATE", NULL, 1, 10), FERRY_ERR_INVALID_ARGUMENT, "args", "NULL args with a count");
  check_error(count(a.user, "Item", "TRUEPREDICATE", NULL, 2), FERRY_ERR_INVALID_ARGUMENT, "args", "count: NULL args with a count");
  check_error(find(a.user, "Item", "TRUEPREDICATE", NULL, 0, 0), FERRY_ERR_INVALID_ARGUMENT, "limit", "limit 0");
  check_error(find(a.user, "Item", "TRUEPREDICATE", NULL, 0, FERRY_REMOTE_FIND_MAX_LIMIT + 1), FERRY_ERR_INVALID_ARGUMENT, "limit",
              "limit past the maximum");
  ferry_value_t bad = {.type = 42};
  check_error(find(a.user, "Item", "complexity == $0", &bad, 1, 10), FERRY_ERR_WRONG_TYPE, NULL, "an unknown type tag");
  ferry_value_t bad_string = {.type = FERRY_TYPE_STRING};
  bad_string.u.string.size = 3;
  check_error(count(a.user, "Item", "itemName == $0", &bad_string, 1), FERRY_ERR_INVALID_ARGUMENT, NULL, "NULL string data");
  ferry_value_t bad_ts = v_ts(0, 1000000000);
  check_error(find(a.user, "Item", "complexity == $0", &bad_ts, 1, 10), FERRY_ERR_INVALID_ARGUMENT, NULL, "nanoseconds out of range");
  CHECK_ERR(ferry_remote_find(a.user, "Item", "TRUEPREDICATE", NULL, 0, 10, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_ERR(ferry_remote_count(a.user, "Item", "TRUEPREDICATE", NULL, 0, NULL, NULL), FERRY_ERR_INVALID_ARGUMENT);
  size_t n = 0;
  CHECK_ERR(ferry_remote_results_count(&n, NULL), FERRY_ERR_INVALID_HANDLE);
  CHECK_ERR(ferry_remote_results_count(&n, (ferry_remote_results_t *)a.user), FERRY_ERR_INVALID_HANDLE);
  ferry_remote_results_free(NULL);
}

/* Logged out: the call itself fails. Last, on B. */
static void test_logged_out(void) {
  struct waiter *w = waiter_new();
  CHECK_OUTCOME_OK(finish(ferry_app_log_out(b.app, b.user, on_status, w), w, "log out"), "log out");
  check_error(find(b.user, "Item", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_AUTH, "logged out", "find as a logged-out user");
  check_error(count(b.user, "Item", "TRUEPREDICATE", NULL, 0), FERRY_ERR_AUTH, "logged out", "count as a logged-out user");
}

/* The server gone: a network error. Then a server without the Data API: every call is refused
 * (FERRY_ERR_SYNC, with the server's code and status). */
static void test_server_gone_and_data_api_off(void) {
  server_stop();
  check_error(find(a.user, "Item", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_NETWORK, NULL, "find with the server gone");
  check_error(count(a.user, "Item", "TRUEPREDICATE", NULL, 0), FERRY_ERR_NETWORK, NULL, "count with the server gone");
  server_app_dir = NULL; /* examples/item-app: no http_endpoints/data_api_config.json */
  CHECK(server_start());
  struct device d;
  device_dirs(&d, "off", NULL);
  d.app = app_on(d.dir, base_url);
  device_login(&d, anonymous, false);
  check_error(find(d.user, "Item", "TRUEPREDICATE", NULL, 0, 10), FERRY_ERR_SYNC, "DataAPIDisabled", "find with the Data API off");
  check_error(count(d.user, "Item", "TRUEPREDICATE", NULL, 0), FERRY_ERR_SYNC, "HTTP 404", "count with the Data API off");
  ferry_user_free(d.user);
  ferry_app_free(d.app);
}

int main(void) {
  server_app_dir = FERRY_REPO_DIR "/Tests/Fixtures/data-api-app";
  if (!server_start()) {
    printf("test_remote: SKIPPED: %s\n", server_skip_reason);
    return 77;
  }
  note_main_thread();
  make_schema();
  printf("test_remote: ferry-server at %s\n", base_url);
  fflush(stdout);
  device_up(&a, "a");
  device_up(&b, "b");
  write_data();
  double t0 = now_s();
  test_items_by_rules_and_pages();
  test_reading_values();
  test_sorted();
  printf("test_remote: remote queries took %.2f s\n", now_s() - t0);
  test_errors();
  test_logged_out();
  test_server_gone_and_data_api_off();
  device_free_handles(&a);
  device_free_handles(&b);
  ferry_schema_free(schema);
  server_stop();
  return check_done("test_remote");
}
