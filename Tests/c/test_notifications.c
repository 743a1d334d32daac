/*
 * test_notifications.c — query and object notifications, delivered on Ferry's loop thread
 * (FERRY_DELIVERY_LOOP: waited for with a condition variable and a deadline, never with a
 * sleep) and through a pollable descriptor (FERRY_DELIVERY_POLL: poll() with a timeout, then
 * ferry_db_deliver_notifications). Freeing a token stops delivery; userdata_free runs exactly
 * once, also when a registration fails.
 *
 * "Nothing was delivered" is checked with a barrier rather than a wait: a later commit that
 * the same registration (or a second one) must report, after which the unwanted report would
 * already have arrived. In POLL mode delivery is synchronous, so those checks are exact.
 */
#include "check.h"

#include <poll.h>
#include <pthread.h>

#define WAIT_SECONDS 20 /* generous: valgrind is slow */
#define MAX_KEYS 256

struct recorder {
  const char *name;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int calls;
  int64_t inserted[MAX_KEYS];
  size_t n_inserted;
  int64_t deleted[MAX_KEYS];
  size_t n_deleted;
  int64_t modified[MAX_KEYS];
  size_t n_modified;
  ferry_property_key_t props[MAX_KEYS];
  size_t n_props;
  int bad_values;      /* keys that were not ints, counts that were odd */
  pthread_t thread;    /* the thread of the last call */
  int freed;           /* userdata_free calls */
  /* optional behaviours */
  ferry_notification_token_t *self_token; /* freed from inside the callback */
  ferry_db_t *query_db;                   /* queried from inside the callback */
  int inner_rc;
  size_t inner_count;
  ferry_db_t *close_db;                   /* closed from inside the callback */
};

static void rec_init(struct recorder *r, const char *name) {
  memset(r, 0, sizeof *r);
  r->name = name;
  pthread_mutex_init(&r->mu, NULL);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cv, &attr);
  pthread_condattr_destroy(&attr);
  r->inner_rc = -999;
}

static void rec_destroy(struct recorder *r) {
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
}

/* Forgets what was recorded (not the counters of calls and frees). */
static void rec_clear(struct recorder *r) {
  pthread_mutex_lock(&r->mu);
  r->n_inserted = r->n_deleted = r->n_modified = r->n_props = 0;
  pthread_mutex_unlock(&r->mu);
}

static void copy_keys(struct recorder *r, int64_t *dst, size_t *n, const ferry_value_t *src,
                      size_t count) {
  if (count > 0 && src == NULL) r->bad_values++;
  for (size_t i = 0; i < count && src; i++) {
    if (src[i].type != FERRY_TYPE_INT) {
      r->bad_values++;
      continue;
    }
    if (*n < MAX_KEYS) dst[(*n)++] = src[i].u.i;
  }
}

static void on_change(void *userdata, const ferry_change_set_t *c) {
  struct recorder *r = userdata;
  pthread_mutex_lock(&r->mu);
  if (c == NULL) {
    r->bad_values++;
  } else {
    copy_keys(r, r->inserted, &r->n_inserted, c->inserted, c->inserted_count);
    copy_keys(r, r->deleted, &r->n_deleted, c->deleted, c->deleted_count);
    copy_keys(r, r->modified, &r->n_modified, c->modified, c->modified_count);
    if (c->modified_properties_count > 0 && c->modified_properties == NULL) r->bad_values++;
    for (size_t i = 0; i < c->modified_properties_count && c->modified_properties; i++)
      if (r->n_props < MAX_KEYS) r->props[r->n_props++] = c->modified_properties[i];
  }
  r->calls++;
  r->thread = pthread_self();
  ferry_notification_token_t *self = r->self_token;
  r->self_token = NULL;
  ferry_db_t *query_db = r->query_db;
  ferry_db_t *close_db = r->close_db;
  r->close_db = NULL;
  pthread_mutex_unlock(&r->mu);

  /* calls into Ferry from the callback, outside our lock */
  if (query_db) {
    ferry_class_key_t cls = 0;
    ferry_results_t *res = NULL;
    size_t n = 0;
    int rc = ferry_db_find_class(&cls, query_db, "Task");
    if (rc == FERRY_OK) rc = ferry_db_query(&res, query_db, cls, "TRUEPREDICATE", NULL, 0);
    if (rc == FERRY_OK) rc = ferry_results_count(&n, res);
    ferry_results_free(res);
    pthread_mutex_lock(&r->mu);
    r->inner_rc = rc;
    r->inner_count = n;
    pthread_mutex_unlock(&r->mu);
  }
  if (self) ferry_notification_token_free(self);
  if (close_db) {
    int rc = ferry_db_close(close_db);
    pthread_mutex_lock(&r->mu);
    r->inner_rc = rc;
    pthread_mutex_unlock(&r->mu);
  }
  pthread_mutex_lock(&r->mu);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static void on_free(void *userdata) {
  struct recorder *r = userdata;
  pthread_mutex_lock(&r->mu);
  r->freed++;
  pthread_mutex_unlock(&r->mu);
}

static bool has(const int64_t *keys, size_t n, int64_t k) {
  for (size_t i = 0; i < n; i++)
    if (keys[i] == k) return true;
  return false;
}

static int rec_calls(struct recorder *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->calls;
  pthread_mutex_unlock(&r->mu);
  return n;
}
static int rec_freed(struct recorder *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->freed;
  pthread_mutex_unlock(&r->mu);
  return n;
}

enum what { INSERTED, DELETED, MODIFIED, CALLS_AT_LEAST };

/* Whether the recorder holds every key in keys (or calls >= keys[0]); called with r->mu held. */
static bool rec_has_all(struct recorder *r, enum what w, const int64_t *keys, size_t n) {
  for (size_t i = 0; i < n; i++) {
    switch (w) {
      case INSERTED: if (!has(r->inserted, r->n_inserted, keys[i])) return false; break;
      case DELETED: if (!has(r->deleted, r->n_deleted, keys[i])) return false; break;
      case MODIFIED: if (!has(r->modified, r->n_modified, keys[i])) return false; break;
      case CALLS_AT_LEAST: if (r->calls < keys[i]) return false; break;
    }
  }
  return true;
}

/* Waits on the condition variable until the recorder holds the keys, up to WAIT_SECONDS. */
static bool rec_wait(struct recorder *r, enum what w, const int64_t *keys, size_t n) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += WAIT_SECONDS;
  pthread_mutex_lock(&r->mu);
  bool ok;
  while (!(ok = rec_has_all(r, w, keys, n))) {
    if (pthread_cond_timedwait(&r->cv, &r->mu, &deadline) == ETIMEDOUT) {
      ok = rec_has_all(r, w, keys, n);
      break;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return ok;
}

#define WAIT_FOR(r, w, ...)                                                            \
  do {                                                                                 \
    const int64_t wait_keys_[] = {__VA_ARGS__};                                        \
    CHECKF(rec_wait((r), (w), wait_keys_, sizeof wait_keys_ / sizeof wait_keys_[0]),   \
           "%s: timed out after %d s waiting for %s {%s}", (r)->name, WAIT_SECONDS, #w, \
           #__VA_ARGS__);                                                              \
  } while (0)

/* ---- the schema and writes -------------------------------------------------------------- */

static ferry_schema_t *make_schema(void) {
  static const ferry_property_info_t task[] = {
      {"_id", FERRY_TYPE_INT, FERRY_PROPERTY_PRIMARY_KEY, NULL},
      {"complexity", FERRY_TYPE_INT, FERRY_PROPERTY_INDEXED, NULL},
      {"title", FERRY_TYPE_STRING, 0, NULL},
      {"tags", FERRY_TYPE_STRING, FERRY_PROPERTY_LIST, NULL},
  };
  ferry_class_info_t classes[] = {{"Task", task, 4, 0}};
  ferry_schema_t *s = NULL;
  CHECK_OK(ferry_schema_new(&s, classes, 1));
  return s;
}

struct keys {
  ferry_class_key_t task;
  ferry_property_key_t id, complexity, title, tags;
};

static struct keys keys_of(ferry_db_t *db) {
  struct keys k;
  k.task = CLASS_KEY(db, "Task");
  k.id = PROP_KEY(db, k.task, "_id");
  k.complexity = PROP_KEY(db, k.task, "complexity");
  k.title = PROP_KEY(db, k.task, "title");
  k.tags = PROP_KEY(db, k.task, "tags");
  return k;
}

static void create_task(ferry_db_t *db, const struct keys *k, int64_t id, int64_t complexity) {
  ferry_property_value_t vals[] = {pv(k->id, v_int(id)), pv(k->complexity, v_int(complexity)),
                                   pv(k->title, v_str("new"))};
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_create(db, k->task, vals, 3));
  CHECK_OK(ferry_db_commit(db));
}

static void set_int(ferry_db_t *db, const struct keys *k, int64_t id, ferry_property_key_t p,
                    int64_t value) {
  ferry_value_t key = v_int(id), v = v_int(value);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_set(db, k->task, &key, p, &v));
  CHECK_OK(ferry_db_commit(db));
}

static void set_title(ferry_db_t *db, const struct keys *k, int64_t id, const char *title) {
  ferry_value_t key = v_int(id), v = v_str(title);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_set(db, k->task, &key, k->title, &v));
  CHECK_OK(ferry_db_commit(db));
}

static void delete_task(ferry_db_t *db, const struct keys *k, int64_t id) {
  ferry_value_t key = v_int(id);
  CHECK_OK(ferry_db_begin_write(db));
  CHECK_OK(ferry_object_delete(db, k->task, &key));
  CHECK_OK(ferry_db_commit(db));
}

static ferry_notification_token_t *observe_query(ferry_db_t *db, const struct keys *k,
                                                 const char *q, struct recorder *r) {
  ferry_notification_token_t *t = NULL;
  CHECK_OK(ferry_db_observe_query(&t, db, k->task, q, NULL, 0, on_change, r, on_free));
  CHECK(t != NULL);
  return t;
}

static ferry_notification_token_t *observe_object(ferry_db_t *db, const struct keys *k, int64_t id,
                                                  struct recorder *r) {
  ferry_notification_token_t *t = NULL;
  ferry_value_t key = v_int(id);
  CHECK_OK(ferry_db_observe_object(&t, db, k->task, &key, on_change, r, on_free));
  CHECK(t != NULL);
  return t;
}

/* ---- FERRY_DELIVERY_LOOP ------------------------------------------------------------------ */

static void test_loop(const ferry_schema_t *schema) {
  const char *path = test_path("loop.ferry");
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_LOOP, false));
  struct keys k = keys_of(db);

  struct recorder rq, ro, rbar;
  rec_init(&rq, "query complexity <= 4");
  rec_init(&ro, "object 1");
  rec_init(&rbar, "barrier TRUEPREDICATE");
  ferry_notification_token_t *tq = observe_query(db, &k, "complexity <= 4", &rq);
  ferry_notification_token_t *to = observe_object(db, &k, 1, &ro); /* does not exist yet */
  ferry_notification_token_t *tbar = observe_query(db, &k, "TRUEPREDICATE", &rbar);
  CHECK_EQ_INT(rec_calls(&rq), 0); /* no initial call: only commits are reported */

  /* inserts: 1 and 3 enter the results, 2 does not */
  CHECK_OK(ferry_db_begin_write(db));
  for (int64_t id = 1; id <= 3; id++) {
    ferry_property_value_t vals[] = {pv(k.id, v_int(id)), pv(k.complexity, v_int(id == 2 ? 5 : id)),
                                     pv(k.title, v_str("t"))};
    CHECK_OK(ferry_object_create(db, k.task, vals, 3));
  }
  CHECK_OK(ferry_db_commit(db));
  WAIT_FOR(&rq, INSERTED, 1, 3);
  WAIT_FOR(&ro, INSERTED, 1);
  WAIT_FOR(&rbar, INSERTED, 1, 2, 3);
  pthread_mutex_lock(&rq.mu);
  CHECK(!has(rq.inserted, rq.n_inserted, 2));
  CHECK_EQ_INT(rq.n_inserted, 2);
  CHECK_EQ_INT(rq.n_deleted + rq.n_modified, 0);
  CHECK(!pthread_equal(rq.thread, pthread_self())); /* on Ferry's loop thread */
  pthread_mutex_unlock(&rq.mu);
  pthread_mutex_lock(&ro.mu);
  CHECK_EQ_INT(ro.n_inserted, 1);
  CHECK_EQ_INT(ro.n_deleted + ro.n_modified, 0);
  pthread_mutex_unlock(&ro.mu);
  rec_clear(&rq);
  rec_clear(&ro);

  /* a modification of an object in the results, with its property */
  set_title(db, &k, 1, "renamed");
  WAIT_FOR(&rq, MODIFIED, 1);
  WAIT_FOR(&ro, MODIFIED, 1);
  pthread_mutex_lock(&rq.mu);
  CHECK_EQ_INT(rq.n_props, 1);
  CHECK_EQ_INT(rq.props[0], k.title);
  CHECK_EQ_INT(rq.n_inserted + rq.n_deleted, 0);
  pthread_mutex_unlock(&rq.mu);
  pthread_mutex_lock(&ro.mu);
  CHECK_EQ_INT(ro.n_modified, 1);
  CHECK_EQ_INT(ro.n_props, 1);
  CHECK_EQ_INT(ro.props[0], k.title);
  pthread_mutex_unlock(&ro.mu);
  rec_clear(&rq);
  rec_clear(&ro);

  /* 3 leaves the results (reported as deleted); object 1 is untouched */
  set_int(db, &k, 3, k.complexity, 7);
  WAIT_FOR(&rq, DELETED, 3);
  /* 4 never enters the results; 5 does: when 5 is reported, 4 would have been too */
  create_task(db, &k, 4, 9);
  create_task(db, &k, 5, 0);
  WAIT_FOR(&rq, INSERTED, 5);
  pthread_mutex_lock(&rq.mu);
  CHECK(!has(rq.inserted, rq.n_inserted, 4) && !has(rq.modified, rq.n_modified, 4) &&
        !has(rq.deleted, rq.n_deleted, 4));
  pthread_mutex_unlock(&rq.mu);
  /* a list change on object 1 is a modification of "tags" */
  {
    ferry_value_t key = v_int(1), tag = v_str("urgent");
    CHECK_OK(ferry_db_begin_write(db));
    CHECK_OK(ferry_list_insert(db, k.task, &key, k.tags, 0, &tag));
    CHECK_OK(ferry_db_commit(db));
  }
  WAIT_FOR(&ro, MODIFIED, 1);
  WAIT_FOR(&rq, MODIFIED, 1);
  pthread_mutex_lock(&ro.mu);
  CHECK_EQ_INT(ro.n_modified, 1); /* the complexity change of 3 and creations were not reported */
  CHECK_EQ_INT(ro.n_props, 1);
  CHECK_EQ_INT(ro.props[0], k.tags);
  CHECK_EQ_INT(ro.n_inserted + ro.n_deleted, 0);
  pthread_mutex_unlock(&ro.mu);
  rec_clear(&rq);
  rec_clear(&ro);

  /* deleting object 1: reported to both; the object registration goes on */
  delete_task(db, &k, 1);
  WAIT_FOR(&rq, DELETED, 1);
  WAIT_FOR(&ro, DELETED, 1);
  pthread_mutex_lock(&ro.mu);
  CHECK_EQ_INT(ro.n_deleted, 1);
  pthread_mutex_unlock(&ro.mu);
  rec_clear(&ro);
  create_task(db, &k, 1, 2); /* recreated: both report an insert */
  WAIT_FOR(&rq, INSERTED, 1);
  WAIT_FOR(&ro, INSERTED, 1);
  rec_clear(&rq);
  set_title(db, &k, 1, "again");
  WAIT_FOR(&rq, MODIFIED, 1);
  WAIT_FOR(&ro, MODIFIED, 1);
  CHECK_EQ_INT(rec_freed(&ro), 0); /* userdata_free runs when the token is freed */
  ferry_notification_token_free(to);
  CHECK_EQ_INT(rec_freed(&ro), 1);

  /* a transaction that changes nothing observable, and a cancelled one, report nothing */
  int rq_calls = rec_calls(&rq);
  CHECK_OK(ferry_db_begin_write(db));
  ferry_value_t key5 = v_int(5);
  CHECK_OK(ferry_object_delete(db, k.task, &key5));
  CHECK_OK(ferry_db_cancel(db));
  create_task(db, &k, 6, 8); /* outside the query */
  rec_clear(&rbar);
  create_task(db, &k, 7, 1); /* inside: the barrier */
  WAIT_FOR(&rq, INSERTED, 7);
  WAIT_FOR(&rbar, INSERTED, 7);
  pthread_mutex_lock(&rq.mu);
  CHECK(!has(rq.deleted, rq.n_deleted, 5));
  CHECK(!has(rq.inserted, rq.n_inserted, 6));
  pthread_mutex_unlock(&rq.mu);
  CHECK_EQ_INT(rec_calls(&rq), rq_calls + 1); /* the 7 insert only: nothing for 5 and 6 */

  /* freeing a token stops delivery at once, and runs userdata_free exactly once */
  CHECK_EQ_INT(rec_freed(&rq), 0);
  ferry_notification_token_free(tq);
  CHECK_EQ_INT(rec_freed(&rq), 1);
  rq_calls = rec_calls(&rq);
  rec_clear(&rbar);
  create_task(db, &k, 8, 0);
  WAIT_FOR(&rbar, INSERTED, 8);
  CHECK_EQ_INT(rec_calls(&rq), rq_calls);

  /* a callback that queries the database and frees its own token */
  struct recorder rself;
  rec_init(&rself, "self-freeing");
  ferry_notification_token_t *tself = observe_query(db, &k, "complexity <= 4", &rself);
  pthread_mutex_lock(&rself.mu);
  rself.self_token = tself;
  rself.query_db = db;
  pthread_mutex_unlock(&rself.mu);
  create_task(db, &k, 9, 0);
  WAIT_FOR(&rself, INSERTED, 9);
  /* the token is freed inside the callback, after which userdata_free has run */
  {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += WAIT_SECONDS;
    pthread_mutex_lock(&rself.mu);
    while (rself.freed == 0 &&
           pthread_cond_timedwait(&rself.cv, &rself.mu, &deadline) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&rself.mu);
  }
  CHECK_EQ_INT(rec_freed(&rself), 1);
  pthread_mutex_lock(&rself.mu);
  CHECKF(rself.inner_rc == FERRY_OK, "a query from inside the callback returned %d", rself.inner_rc);
  CHECK(rself.inner_count >= 1);
  pthread_mutex_unlock(&rself.mu);
  int self_calls = rec_calls(&rself);
  rec_clear(&rbar);
  create_task(db, &k, 10, 0);
  WAIT_FOR(&rbar, INSERTED, 10);
  CHECK_EQ_INT(rec_calls(&rself), self_calls);
  CHECK_EQ_INT(rec_freed(&rself), 1);

  /* registrations on another handle of the same file see this handle's commits */
  ferry_db_t *db2 = NULL;
  CHECK_OK(db_open_path(&db2, path, NULL, FERRY_DELIVERY_LOOP, false));
  struct keys k2 = keys_of(db2);
  struct recorder r2;
  rec_init(&r2, "second handle");
  ferry_notification_token_t *t2 = observe_query(db2, &k2, "complexity >= 100", &r2);
  create_task(db, &k, 11, 100);
  WAIT_FOR(&r2, INSERTED, 11);
  /* closing that handle stops its registrations; the token must still be freed */
  CHECK_OK(ferry_db_close(db2));
  int r2_calls = rec_calls(&r2);
  rec_clear(&rbar);
  create_task(db, &k, 12, 100);
  WAIT_FOR(&rbar, INSERTED, 12);
  CHECK_EQ_INT(rec_calls(&r2), r2_calls);
  CHECK_EQ_INT(rec_freed(&r2), 0);
  ferry_notification_token_free(t2);
  CHECK_EQ_INT(rec_freed(&r2), 1);
  ferry_db_free(db2);

  /* a callback may close its own database */
  ferry_db_t *db3 = NULL;
  CHECK_OK(db_open_path(&db3, path, NULL, FERRY_DELIVERY_LOOP, false));
  struct recorder r3;
  rec_init(&r3, "closing callback");
  struct keys k3 = keys_of(db3);
  ferry_notification_token_t *t3 = observe_query(db3, &k3, "TRUEPREDICATE", &r3);
  pthread_mutex_lock(&r3.mu);
  r3.close_db = db3;
  pthread_mutex_unlock(&r3.mu);
  create_task(db, &k, 13, 0);
  WAIT_FOR(&r3, INSERTED, 13);
  {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += WAIT_SECONDS;
    pthread_mutex_lock(&r3.mu);
    while (r3.inner_rc == -999 && pthread_cond_timedwait(&r3.cv, &r3.mu, &deadline) != ETIMEDOUT) {
    }
    CHECKF(r3.inner_rc == FERRY_OK, "ferry_db_close inside a callback returned %d", r3.inner_rc);
    pthread_mutex_unlock(&r3.mu);
  }
  bool closed = false;
  CHECK_OK(ferry_db_is_closed(&closed, db3));
  CHECK(closed);
  ferry_notification_token_free(t3);
  CHECK_EQ_INT(rec_freed(&r3), 1);
  ferry_db_free(db3);

  /* many commits in a row all arrive, in one or several calls */
  rec_clear(&rbar);
  for (int64_t id = 100; id < 150; id++) create_task(db, &k, id, id % 10);
  for (int64_t id = 100; id < 150; id++) WAIT_FOR(&rbar, INSERTED, id);

  ferry_notification_token_free(tbar);
  CHECK_EQ_INT(rec_freed(&rbar), 1);
  CHECK_EQ_INT(rq.bad_values + ro.bad_values + rbar.bad_values + rself.bad_values + r2.bad_values +
                   r3.bad_values, 0);
  ferry_db_free(db);
  rec_destroy(&rq);
  rec_destroy(&ro);
  rec_destroy(&rbar);
  rec_destroy(&rself);
  rec_destroy(&r2);
  rec_destroy(&r3);
}

/* ---- userdata_free when a registration fails ---------------------------------------------- */

static void test_failed_registrations(const ferry_schema_t *schema) {
  ferry_db_t *db = NULL;
  CHECK_OK(db_open_mem(&db, "test-notifications-fail", schema, FERRY_DELIVERY_LOOP));
  struct keys k = keys_of(db);
  struct recorder r;
  rec_init(&r, "failing registrations");
  ferry_notification_token_t *t = (ferry_notification_token_t *)&t;
  ferry_notification_token_t *const untouched = t;
  ferry_value_t key = v_int(1), wrong_key = v_str("1");
  int expected_frees = 0;

#define FAILS(expr, code)                            \
  do {                                               \
    CHECK_ERR(expr, code);                           \
    expected_frees++;                                \
    CHECK_EQ_INT(rec_freed(&r), expected_frees);     \
    CHECK(t == untouched);                           \
  } while (0)

  FAILS(ferry_db_observe_query(&t, db, k.task, "complexity <=", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_QUERY);
  FAILS(ferry_db_observe_query(&t, db, k.task, "nosuch == 1", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_QUERY);
  FAILS(ferry_db_observe_query(&t, db, 99, "TRUEPREDICATE", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_NO_SUCH_CLASS);
  FAILS(ferry_db_observe_query(&t, db, k.task, "TRUEPREDICATE", NULL, 0, NULL, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_query(NULL, db, k.task, "TRUEPREDICATE", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_query(&t, db, k.task, NULL, NULL, 0, on_change, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_query(&t, db, k.task, "complexity == $0", NULL, 1, on_change, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_query(&t, NULL, k.task, "TRUEPREDICATE", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_INVALID_HANDLE);
  FAILS(ferry_db_observe_object(&t, db, k.task, &wrong_key, on_change, &r, on_free),
        FERRY_ERR_WRONG_TYPE);
  FAILS(ferry_db_observe_object(&t, db, 99, &key, on_change, &r, on_free), FERRY_ERR_NO_SUCH_CLASS);
  FAILS(ferry_db_observe_object(&t, db, k.task, NULL, on_change, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_object(&t, db, k.task, &key, NULL, &r, on_free), FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_object(NULL, db, k.task, &key, on_change, &r, on_free),
        FERRY_ERR_INVALID_ARGUMENT);
  FAILS(ferry_db_observe_object(&t, NULL, k.task, &key, on_change, &r, on_free),
        FERRY_ERR_INVALID_HANDLE);

  /* a failing registration without userdata_free is fine too */
  CHECK_ERR(ferry_db_observe_query(&t, db, k.task, "(", NULL, 0, on_change, &r, NULL), FERRY_ERR_QUERY);

  /* on a closed database */
  CHECK_OK(ferry_db_close(db));
  FAILS(ferry_db_observe_query(&t, db, k.task, "TRUEPREDICATE", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_CLOSED);
  FAILS(ferry_db_observe_object(&t, db, k.task, &key, on_change, &r, on_free), FERRY_ERR_CLOSED);
  ferry_db_free(db);
  /* on a freed database */
  FAILS(ferry_db_observe_query(&t, db, k.task, "TRUEPREDICATE", NULL, 0, on_change, &r, on_free),
        FERRY_ERR_INVALID_HANDLE);
  FAILS(ferry_db_observe_object(&t, db, k.task, &key, on_change, &r, on_free),
        FERRY_ERR_INVALID_HANDLE);
#undef FAILS
  CHECK_EQ_INT(rec_calls(&r), 0);
  ferry_notification_token_free(NULL);
  rec_destroy(&r);
}

/* ---- FERRY_DELIVERY_POLL ------------------------------------------------------------------ */

static bool fd_readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  int rc;
  do rc = poll(&p, 1, timeout_ms);
  while (rc < 0 && errno == EINTR);
  CHECKF(rc >= 0, "poll: %s", strerror(errno));
  CHECKF(!(p.revents & (POLLERR | POLLNVAL)), "poll revents 0x%x", p.revents);
  return rc == 1 && (p.revents & POLLIN);
}

/* Waits for the descriptor, then delivers; returns the number of callbacks run. */
static size_t poll_and_deliver(ferry_db_t *db, int fd) {
  CHECKF(fd_readable(fd, WAIT_SECONDS * 1000), "the notification fd did not become readable in %d s",
         WAIT_SECONDS);
  size_t delivered = 12345;
  CHECK_OK(ferry_db_deliver_notifications(&delivered, db));
  CHECK(delivered != 12345);
  /* delivering clears the readiness */
  CHECKF(!fd_readable(fd, 0), "the fd is still readable after delivery");
  return delivered;
}

static void test_poll(const ferry_schema_t *schema) {
  const char *path = test_path("poll.ferry");
  ferry_db_t *db = NULL, *writer = NULL;
  CHECK_OK(db_open_path(&db, path, schema, FERRY_DELIVERY_POLL, false));
  CHECK_OK(db_open_path(&writer, path, NULL, FERRY_DELIVERY_LOOP, false));
  struct keys k = keys_of(db);

  /* the LOOP handle has no descriptor */
  int fd = -12345;
  CHECK_ERR(ferry_db_notification_fd(&fd, writer), FERRY_ERR_INVALID_ARGUMENT);
  CHECK_EQ_INT(fd, -12345);
  size_t delivered = 0;
  CHECK_ERR(ferry_db_deliver_notifications(&delivered, writer), FERRY_ERR_INVALID_ARGUMENT);

  CHECK_OK(ferry_db_notification_fd(&fd, db));
  CHECK(fd >= 0);
  int fd2 = -1;
  CHECK_OK(ferry_db_notification_fd(&fd2, db));
  CHECK_EQ_INT(fd2, fd);
  CHECK(!fd_readable(fd, 0));
  CHECK_OK(ferry_db_deliver_notifications(&delivered, db));
  CHECK_EQ_INT(delivered, 0);
  CHECK_OK(ferry_db_deliver_notifications(NULL, db));

  struct recorder rq, ro;
  rec_init(&rq, "poll query");
  rec_init(&ro, "poll object 1");
  ferry_notification_token_t *tq = observe_query(db, &k, "complexity <= 4", &rq);
  ferry_notification_token_t *to = observe_object(db, &k, 1, &ro);

  /* a commit through this handle: nothing runs before deliver, then exactly our two */
  create_task(db, &k, 1, 1);
  create_task(db, &k, 2, 5);
  CHECK_EQ_INT(rec_calls(&rq) + rec_calls(&ro), 0);
  delivered = poll_and_deliver(db, fd);
  CHECK_EQ_INT(delivered, 2); /* the second commit is not observed by either */
  CHECK(rec_calls(&ro) == 1);
  CHECK(rec_calls(&rq) >= 1);
  CHECK(pthread_equal(rq.thread, pthread_self()));
  CHECK(pthread_equal(ro.thread, pthread_self()));
  CHECK(rq.n_inserted == 1 && rq.inserted[0] == 1);
  CHECK(ro.n_inserted == 1 && ro.inserted[0] == 1);
  CHECK_OK(ferry_db_deliver_notifications(&delivered, db));
  CHECK_EQ_INT(delivered, 0);
  rec_clear(&rq);
  rec_clear(&ro);

  /* a commit through another handle of the same file */
  set_title(writer, &k, 1, "from the writer");
  delivered = poll_and_deliver(db, fd);
  CHECK_EQ_INT(delivered, 2);
  CHECK(rq.n_modified == 1 && rq.modified[0] == 1 && rq.n_props == 1 && rq.props[0] == k.title);
  CHECK(ro.n_modified == 1 && ro.modified[0] == 1 && ro.n_props == 1 && ro.props[0] == k.title);
  rec_clear(&rq);
  rec_clear(&ro);

  /* several commits before one delivery: everything arrives */
  create_task(writer, &k, 3, 3);
  create_task(writer, &k, 4, 4);
  set_int(writer, &k, 2, k.complexity, 0); /* 2 enters */
  int before = rec_calls(&rq);
  delivered = poll_and_deliver(db, fd);
  CHECK(delivered >= 1 && delivered <= 3);
  CHECK(rec_calls(&rq) - before >= 1 && rec_calls(&rq) - before <= 3);
  CHECK(has(rq.inserted, rq.n_inserted, 2) && has(rq.inserted, rq.n_inserted, 3) &&
        has(rq.inserted, rq.n_inserted, 4));
  CHECK_EQ_INT(rec_calls(&ro), 2); /* object 1 did not change */
  rec_clear(&rq);

  /* deleting object 1 is reported; the registration goes on and sees it created again */
  delete_task(writer, &k, 1);
  delivered = poll_and_deliver(db, fd);
  CHECK_EQ_INT(delivered, 2);
  CHECK(ro.n_deleted == 1 && ro.deleted[0] == 1);
  CHECK(rq.n_deleted == 1 && rq.deleted[0] == 1);
  rec_clear(&rq);
  rec_clear(&ro);
  create_task(writer, &k, 1, 1);
  delivered = poll_and_deliver(db, fd);
  CHECK_EQ_INT(delivered, 2);
  CHECK_EQ_INT(rec_calls(&ro), 4);
  CHECK(ro.n_inserted == 1 && ro.inserted[0] == 1);
  CHECK(rq.n_inserted == 1 && rq.inserted[0] == 1);
  ferry_notification_token_free(to);
  CHECK_EQ_INT(rec_freed(&ro), 1);

  /* freeing the query token: nothing is delivered any more */
  ferry_notification_token_free(tq);
  CHECK_EQ_INT(rec_freed(&rq), 1);
  int rq_calls = rec_calls(&rq);
  create_task(writer, &k, 5, 0);
  (void)fd_readable(fd, 200); /* readiness is allowed either way: nothing is registered */
  CHECK_OK(ferry_db_deliver_notifications(&delivered, db));
  CHECK_EQ_INT(delivered, 0);
  CHECK_EQ_INT(rec_calls(&rq), rq_calls);

  /* a token freed while its notification is pending is not called */
  struct recorder rp;
  rec_init(&rp, "pending then freed");
  ferry_notification_token_t *tp = observe_query(db, &k, "TRUEPREDICATE", &rp);
  create_task(writer, &k, 6, 0);
  CHECK(fd_readable(fd, WAIT_SECONDS * 1000));
  ferry_notification_token_free(tp);
  CHECK_EQ_INT(rec_freed(&rp), 1);
  CHECK_OK(ferry_db_deliver_notifications(&delivered, db));
  CHECK_EQ_INT(delivered, 0);
  CHECK_EQ_INT(rec_calls(&rp), 0);

  /* a token still registered when its database is closed and freed */
  struct recorder rl;
  rec_init(&rl, "outlives the database");
  ferry_notification_token_t *tl = observe_query(db, &k, "TRUEPREDICATE", &rl);
  CHECK_OK(ferry_db_close(db));
  CHECK_ERR(ferry_db_deliver_notifications(&delivered, db), FERRY_ERR_CLOSED);
  ferry_db_free(db);
  CHECK_EQ_INT(rec_freed(&rl), 0);
  ferry_notification_token_free(tl);
  CHECK_EQ_INT(rec_freed(&rl), 1);
  CHECK_EQ_INT(rec_calls(&rl), 0);

  CHECK_EQ_INT(rq.bad_values + ro.bad_values + rp.bad_values + rl.bad_values, 0);
  ferry_db_free(writer);
  rec_destroy(&rq);
  rec_destroy(&ro);
  rec_destroy(&rp);
  rec_destroy(&rl);
}

/* ---- an in-memory database notifies too ------------------------------------------------- */

static void test_in_memory(const ferry_schema_t *schema) {
  ferry_db_t *a = NULL, *b = NULL;
  CHECK_OK(db_open_mem(&a, "test-notifications-mem", schema, FERRY_DELIVERY_LOOP));
  CHECK_OK(db_open_mem(&b, "test-notifications-mem", NULL, FERRY_DELIVERY_POLL));
  struct keys k = keys_of(a);
  struct recorder ra, rb;
  rec_init(&ra, "in-memory loop");
  rec_init(&rb, "in-memory poll");
  ferry_notification_token_t *ta = observe_query(a, &k, "complexity <= 4", &ra);
  ferry_notification_token_t *tb = observe_object(b, &k, 42, &rb);
  int fd = -1;
  CHECK_OK(ferry_db_notification_fd(&fd, b));
  create_task(a, &k, 42, 3);
  WAIT_FOR(&ra, INSERTED, 42);
  CHECK_EQ_INT(poll_and_deliver(b, fd), 1);
  CHECK(rb.n_inserted == 1 && rb.inserted[0] == 42);
  ferry_notification_token_free(ta);
  ferry_notification_token_free(tb);
  CHECK_EQ_INT(rec_freed(&ra) + rec_freed(&rb), 2);
  ferry_db_free(b);
  ferry_db_free(a);
  rec_destroy(&ra);
  rec_destroy(&rb);
}

int main(void) {
  ferry_schema_t *schema = make_schema();
  test_failed_registrations(schema);
  test_loop(schema);
  test_poll(schema);
  test_in_memory(schema);
  ferry_schema_free(schema);
  return check_done("test_notifications");
}
